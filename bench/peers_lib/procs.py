"""Process-tree CPU accounting from /proc (Linux only)."""

import os

CLK_TCK = os.sysconf("SC_CLK_TCK")


def _stat(pid):
    """(ppid, utime+stime ticks) of one process (all its threads), or None if gone."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            data = f.read().decode("ascii", "replace")
    except OSError:
        return None
    # comm (field 2) is in parentheses and may contain spaces: split after the last ')'.
    rest = data[data.rindex(")") + 2:].split()
    # rest[0] is field 3 (state); utime/stime are fields 14/15.
    return int(rest[1]), int(rest[11]) + int(rest[12])


def tree(root):
    """PIDs of root and all its descendants."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _stat(int(entry))
            if st:
                children.setdefault(st[0], []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


def snapshot(root):
    """{pid: cpu ticks} for the whole tree under root."""
    snap = {}
    for pid in tree(root):
        st = _stat(pid)
        if st:
            snap[pid] = st[1]
    return snap


def cpu_seconds_between(before, after):
    """CPU seconds the tree used between two snapshots.

    A process that appeared in between counts from zero; one that vanished
    contributes nothing (its last interval is lost, which only matters if a
    server forks short-lived workers -- none of the measured ones does).
    """
    ticks = 0
    for pid, t in after.items():
        ticks += t - before.get(pid, 0)
    return ticks / CLK_TCK


def cpu_ticks(pid):
    """CPU ticks (user + system) of one process or thread so far; 0 if gone."""
    st = _stat(pid)
    return st[1] if st else 0


def core_cpu(cpu):
    """{'busy': s, 'irq': s} of one CPU from /proc/stat: busy is user, nice,
    system, irq and softirq; irq is hard and soft interrupt time alone."""
    tag = "cpu%d" % cpu
    with open("/proc/stat") as f:
        for line in f:
            fields = line.split()
            if fields and fields[0] == tag:
                user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in fields[1:8])
                return {"busy": (user + nice + system + irq + softirq) / CLK_TCK,
                        "irq": (irq + softirq) / CLK_TCK}
    raise ValueError("no %s in /proc/stat" % tag)


def system_cpu():
    """{'busy': s, 'softirq': s, 'steal': s} summed over all CPUs, from /proc/stat."""
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:]
    v = [int(x) for x in fields[:8]] + [0] * max(0, 8 - len(fields))
    user, nice, system, _idle, _iowait, irq, softirq, steal = v[:8]
    return {"busy": (user + nice + system + irq) / CLK_TCK,
            "softirq": softirq / CLK_TCK, "steal": steal / CLK_TCK}


def thread_count(root):
    """Total threads in the tree under root (from /proc/PID/status)."""
    n = 0
    for pid in tree(root):
        try:
            with open("/proc/%d/status" % pid) as f:
                for line in f:
                    if line.startswith("Threads:"):
                        n += int(line.split()[1])
                        break
        except OSError:
            pass
    return n
