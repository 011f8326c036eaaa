//! Key rollovers (RFC 6781 section 4.1, timings of RFC 7583 section 3):
//! what `pharos key rollover` writes into a zone's keys.
//!
//! - ZSK by pre-publication: the new key is published now and signs from
//!   when every cached DNSKEY RRset holds it (propagation delay + DNSKEY
//!   TTL); the old key retires then and leaves the zone once every
//!   signature it made has expired from caches (propagation delay + the
//!   zone's largest TTL: every RRSIG is signed again at once, the signer
//!   being online).
//! - KSK by double signature: the new key is published and signs the
//!   DNSKEY RRset now, beside the old one. Once validators know it
//!   (propagation delay + DNSKEY TTL) the parent may point its DS at it;
//!   when the operator says it does ([`ZoneKeys::ds_changed`]), the old
//!   key leaves the zone after the old DS has expired from caches
//!   (propagation delay + DS TTL). Until then the old key stays: a DS
//!   change is the parent's, and nothing here can see it happen.
//!
//! Times are Unix seconds, passed in. Keys removed before a rollover are
//! forgotten by it.

use ring::rand::SecureRandom;

use crate::keys::{KeyError, KeyState, KeyTimes, Role, ZoneKey, ZoneKeys};

/// The durations a rollover waits on, in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timings {
    /// The TTL of the zone's DNSKEY RRset.
    pub dnskey_ttl: u32,
    /// The largest TTL of any record (and so signature) the zone serves.
    pub max_ttl: u32,
    /// How long a change takes to reach every server of the zone and its
    /// parent, beyond the TTLs.
    pub propagation: u32,
    /// The TTL of the DS record at the parent.
    pub ds_ttl: u32,
}

impl Timings {
    /// How long until a newly published key is in every cached DNSKEY RRset.
    fn key_known(&self) -> u64 {
        u64::from(self.propagation) + u64::from(self.dnskey_ttl)
    }
}

/// Why a rollover step cannot be taken now.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RolloverError {
    #[error("the zone has a CSK: only zones with a KSK and a ZSK (`pharos key generate --ksk-zsk`) roll their keys")]
    CombinedKey,
    #[error("the zone has no active {0}")]
    NoActiveKey(&'static str),
    #[error("a {0} rollover is under way: wait until the old key is removed (`pharos key show`)")]
    UnderWay(&'static str),
    #[error("no KSK rollover waits for its DS: run `pharos key rollover ZONE --ksk` first")]
    NoKskRollover,
    #[error("the new KSK is in every cached DNSKEY RRset only from {ready} (now {now}): change the DS at the parent after that")]
    NewKskNotKnown { ready: u64, now: u64 },
    #[error(transparent)]
    Key(#[from] KeyError),
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::Csk => "CSK",
        Role::Ksk => "KSK",
        Role::Zsk => "ZSK",
    }
}

impl ZoneKeys {
    /// Starts a ZSK rollover by pre-publication at `now`.
    pub fn roll_zsk(&mut self, now: u64, timings: Timings, random: &dyn SecureRandom) -> Result<(), RolloverError> {
        let old = self.sole_key(Role::Zsk, now)?;
        let active = now + timings.key_known();
        let retired_until = active + u64::from(timings.propagation) + u64::from(timings.max_ttl);
        let algorithm = self.keys[old].algorithm;
        self.keys[old].times.retired = Some(active);
        self.keys[old].times.removed = Some(retired_until);
        let new = ZoneKey::generate(algorithm, Role::Zsk, random)?;
        self.keys.push(new.with_times(KeyTimes { published: now, active: Some(active), retired: None, removed: None }));
        Ok(())
    }

    /// Starts a KSK rollover by double signature at `now`: the new KSK
    /// signs from now; the old one stays until [`ZoneKeys::ds_changed`].
    pub fn roll_ksk(&mut self, now: u64, random: &dyn SecureRandom) -> Result<(), RolloverError> {
        let old = self.sole_key(Role::Ksk, now)?;
        let new = ZoneKey::generate(self.keys[old].algorithm, Role::Ksk, random)?;
        self.keys.push(new.with_times(KeyTimes::active_from(now)));
        Ok(())
    }

    /// The parent's DS names only the new KSK from `now` on: the old KSK
    /// leaves the zone once the old DS has expired from caches.
    pub fn ds_changed(&mut self, now: u64, timings: Timings) -> Result<(), RolloverError> {
        let mut rolling: Vec<usize> = self.live(Role::Ksk, now).filter(|&index| self.keys[index].times.removed.is_none()).collect();
        rolling.sort_by_key(|&index| self.keys[index].times.published);
        let [old, new] = rolling[..] else { return Err(RolloverError::NoKskRollover) };
        let ready = self.keys[new].times.published + timings.key_known();
        if now < ready {
            return Err(RolloverError::NewKskNotKnown { ready, now });
        }
        let gone = now + u64::from(timings.propagation) + u64::from(timings.ds_ttl);
        self.keys[old].times.retired = Some(gone);
        self.keys[old].times.removed = Some(gone);
        Ok(())
    }

    /// The indexes of the keys of `role` not removed at `now`.
    fn live(&self, role: Role, now: u64) -> impl Iterator<Item = usize> + '_ {
        (0..self.keys.len()).filter(move |&index| self.keys[index].role == role && self.keys[index].times.state(now) != KeyState::Removed)
    }

    /// The one key of `role` in use at `now`, with no rollover under way;
    /// keys already removed are forgotten.
    fn sole_key(&mut self, role: Role, now: u64) -> Result<usize, RolloverError> {
        if self.keys.iter().any(|key| key.role == Role::Csk) {
            return Err(RolloverError::CombinedKey);
        }
        self.keys.retain(|key| key.times.state(now) != KeyState::Removed);
        let live: Vec<usize> = self.live(role, now).collect();
        match live[..] {
            [] => Err(RolloverError::NoActiveKey(role_name(role))),
            [index] if self.keys[index].times.state(now) == KeyState::Active && self.keys[index].times.retired.is_none() => Ok(index),
            [_] => Err(RolloverError::NoActiveKey(role_name(role))),
            _ => Err(RolloverError::UnderWay(role_name(role))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::Algorithm;
    use ring::rand::SystemRandom;

    const TIMINGS: Timings = Timings { dnskey_ttl: 300, max_ttl: 3600, propagation: 60, ds_ttl: 7200 };
    const START: u64 = 1_800_000_000;

    fn ksk_zsk() -> ZoneKeys {
        let random = SystemRandom::new();
        let keys = [Role::Ksk, Role::Zsk].map(|role| ZoneKey::generate(Algorithm::EcdsaP256Sha256, role, &random).unwrap());
        ZoneKeys { keys: keys.into_iter().map(|key| key.with_times(KeyTimes::active_from(START - 10))).collect() }
    }

    fn states(keys: &ZoneKeys, now: u64) -> Vec<(Role, KeyState)> {
        keys.keys.iter().map(|key| (key.role, key.times.state(now))).collect()
    }

    #[test]
    fn a_zsk_is_prepublished_then_swapped_then_removed() {
        let mut keys = ksk_zsk();
        keys.roll_zsk(START, TIMINGS, &SystemRandom::new()).unwrap();
        let swap = START + 60 + 300;
        let removal = swap + 60 + 3600;
        use KeyState::*;
        assert_eq!(states(&keys, START), [(Role::Ksk, Active), (Role::Zsk, Active), (Role::Zsk, Published)]);
        assert_eq!(keys.next_step(START), Some(swap));
        assert_eq!(states(&keys, swap), [(Role::Ksk, Active), (Role::Zsk, Retired), (Role::Zsk, Active)]);
        assert_eq!(keys.next_step(swap), Some(removal));
        assert_eq!(states(&keys, removal), [(Role::Ksk, Active), (Role::Zsk, Removed), (Role::Zsk, Active)]);
        assert_eq!(keys.next_step(removal), None);
        let error = keys.roll_zsk(swap, TIMINGS, &SystemRandom::new()).unwrap_err();
        assert_eq!(error, RolloverError::UnderWay("ZSK"));
        // Once the old key is gone, another rollover forgets it.
        keys.roll_zsk(removal, TIMINGS, &SystemRandom::new()).unwrap();
        assert_eq!(keys.keys.len(), 3);
        let read = ZoneKeys::from_setting(&keys.to_setting(), &SystemRandom::new()).unwrap();
        assert_eq!(read.keys.iter().map(|key| key.times).collect::<Vec<_>>(), keys.keys.iter().map(|key| key.times).collect::<Vec<_>>());
    }

    #[test]
    fn a_ksk_is_double_signed_until_the_ds_changed() {
        let mut keys = ksk_zsk();
        keys.roll_ksk(START, &SystemRandom::new()).unwrap();
        use KeyState::*;
        assert_eq!(states(&keys, START), [(Role::Ksk, Active), (Role::Zsk, Active), (Role::Ksk, Active)]);
        assert_eq!(keys.next_step(START), None, "the old KSK waits for the DS");
        let ready = START + 60 + 300;
        assert_eq!(keys.ds_changed(ready - 1, TIMINGS), Err(RolloverError::NewKskNotKnown { ready, now: ready - 1 }));
        assert_eq!(keys.roll_ksk(ready, &SystemRandom::new()), Err(RolloverError::UnderWay("KSK")));
        keys.ds_changed(ready, TIMINGS).unwrap();
        let removal = ready + 60 + 7200;
        assert_eq!(keys.next_step(ready), Some(removal));
        assert_eq!(states(&keys, removal), [(Role::Ksk, Removed), (Role::Zsk, Active), (Role::Ksk, Active)]);
        assert_eq!(keys.ds_changed(removal, TIMINGS), Err(RolloverError::NoKskRollover));
    }

    #[test]
    fn a_csk_or_a_missing_key_is_a_clear_error() {
        let random = SystemRandom::new();
        let mut csk = ZoneKeys { keys: vec![ZoneKey::generate(Algorithm::Ed25519, Role::Csk, &random).unwrap()] };
        assert_eq!(csk.roll_zsk(START, TIMINGS, &random), Err(RolloverError::CombinedKey));
        assert_eq!(csk.roll_ksk(START, &random), Err(RolloverError::CombinedKey));
        let mut ksk_only = ksk_zsk();
        ksk_only.keys.pop();
        assert_eq!(ksk_only.roll_zsk(START, TIMINGS, &random), Err(RolloverError::NoActiveKey("ZSK")));
        assert_eq!(ksk_zsk().ds_changed(START, TIMINGS), Err(RolloverError::NoKskRollover));
    }
}
