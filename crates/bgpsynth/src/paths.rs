//! The routes one route-collector peer sees.
//!
//! Under the usual export rules (Gao, 2001) an AS passes on its customers'
//! routes to everyone but its providers' and peers' routes only to its
//! customers. Every AS path is therefore "valley-free": from the peer it
//! climbs through providers, crosses at most one peering link, then
//! descends through customers. Among those paths the peer here takes a
//! shortest one; real routers weigh more than length, but length is what
//! makes the path-length distribution realistic.

use super::topology::Topology;

/// Still climbing (providers, a peering or customers may follow), or
/// descending (only customers may follow).
const CLIMBING: usize = 0;
const DESCENDING: usize = 1;
const UNSEEN: u32 = u32::MAX;

/// Shortest valley-free paths from one AS to every AS.
pub(crate) struct RoutesFrom {
    /// Per search state (AS index * 2 + phase): the state it was reached
    /// from; the start state is its own parent.
    parent: Vec<u32>,
    /// Per AS: its first state reached, the end of its shortest path.
    nearest: Vec<u32>,
}

impl RoutesFrom {
    /// Breadth-first search over (AS, phase) states from `vantage`.
    pub(crate) fn new(topology: &Topology, vantage: usize) -> RoutesFrom {
        let mut parent = vec![UNSEEN; topology.len() * 2];
        let mut nearest = vec![UNSEEN; topology.len()];
        let start = state(vantage, CLIMBING);
        parent[start as usize] = start;
        let mut queue = vec![start];
        let mut next = 0;
        while let Some(&current) = queue.get(next) {
            next += 1;
            let (node, phase) = (current as usize / 2, current as usize % 2);
            if nearest[node] == UNSEEN {
                nearest[node] = current;
            }
            let mut reach = |neighbours: &[u32], phase| {
                for &neighbour in neighbours {
                    let reached = state(neighbour as usize, phase);
                    if parent[reached as usize] == UNSEEN {
                        parent[reached as usize] = current;
                        queue.push(reached);
                    }
                }
            };
            if phase == CLIMBING {
                reach(&topology.providers[node], CLIMBING);
                reach(&topology.peers[node], DESCENDING);
            }
            reach(&topology.customers[node], DESCENDING);
        }
        RoutesFrom { parent, nearest }
    }

    /// Writes the AS indexes from the vantage point to `origin` into `path`,
    /// vantage point first; leaves it empty if `origin` is unreachable.
    pub(crate) fn path_to(&self, origin: usize, path: &mut Vec<u32>) {
        path.clear();
        let mut current = self.nearest[origin];
        if current == UNSEEN {
            return;
        }
        loop {
            path.push(current / 2);
            let parent = self.parent[current as usize];
            if parent == current {
                break;
            }
            current = parent;
        }
        path.reverse();
    }
}

fn state(node: usize, phase: usize) -> u32 {
    (node * 2 + phase) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    fn path(routes: &RoutesFrom, origin: usize) -> Vec<u32> {
        let mut path = Vec::new();
        routes.path_to(origin, &mut path);
        path
    }

    #[test]
    fn paths_are_valley_free() {
        let topology = Topology::grow(2_000, &mut Rng::new(3));
        let routes = RoutesFrom::new(&topology, 20);
        for origin in (0..topology.len()).step_by(7) {
            let path = path(&routes, origin);
            assert_eq!((path.first(), path.last()), (Some(&20), Some(&(origin as u32))));
            // Once a step goes across or down, no later step goes up or across.
            let mut descending = false;
            for step in path.windows(2) {
                let (from, to) = (step[0] as usize, step[1]);
                let down = topology.customers[from].contains(&to);
                assert!(down || !descending, "valley in {path:?}");
                assert!(down || topology.providers[from].contains(&to) || topology.peers[from].contains(&to));
                descending |= !topology.providers[from].contains(&to);
            }
        }
    }
}
