#!/usr/bin/env python3
"""A model of `kcontrol-bench fleet --fault flapping` (issue 26): 200
reflectors against a server down 2 s / up 1 s five times, then healthy.

It replays each pacing's rules (reflector/src/backoff.rs, RF5 in DESIGN.md)
on that schedule with random jitter, and prints, over many fleets, the
10th/50th/90th percentiles of what the benchmark reports: requests per
client and second while the server fails (refused connections included),
and the seconds from the server's return until every member is in sync.
The model has no server latency and no LIST that lands in an up window,
so its absolute figures are approximate; it reproduces the benchmark's
(client-go 0.29 requests/s and 33-72 s; kcontrol 0.32 and 26-48 s), which
is what makes its variants worth reading.

    python3 scripts/fleet_flapping_model.py
"""

import random

DOWN, UP, FLAPS = 2.0, 1.0, 5
HEALTHY = (FLAPS - 1) * (DOWN + UP) + DOWN
INITIAL, CAP = 0.8, 30.0
SETTLE = 1.0


def up(t):
    if t >= HEALTHY:
        return True
    return t % (DOWN + UP) >= DOWN


def window_end(t):
    return (t // (DOWN + UP)) * (DOWN + UP) + DOWN + UP


class Backoff:
    """client-go's: doubling from 0.8 s to 30 s, waits in [b, 2b)."""

    def __init__(self, rng):
        self.base, self.rng = INITIAL, rng

    def step(self):
        base = min(self.base, CAP)
        self.base = min(base * 2, CAP)
        return base

    def full(self):
        return self.step() * (1 + self.rng.random())

    def spread(self):
        return self.step() * self.rng.random()


def member(rng, confirm, relist_after_confirm, spread_once):
    """One reflector; returns (requests while failing, time in sync).

    confirm(backoff) -> the wait before the watch that confirms a 410 that
    came within SETTLE of the server's first answer after refusals, or
    None to relist without confirming.
    """
    t, requests, backoff = 0.0, 0, Backoff(rng)
    state, answering_since, spread_used = "watch", None, not spread_once
    while True:
        if state == "synced":
            return requests, t
        if t < HEALTHY:
            requests += 1
        if not up(t):  # refused: back off, watch again (relist if listing)
            answering_since = None
            t += backoff.full()
            state = "list" if state == "list" else "watch"
            continue
        if state == "watching":  # a watch that lives until the next fall
            if t >= HEALTHY:
                state = "synced"
            else:
                t, state = window_end(t), "watch"
            continue
        if state == "list":
            state = "watching"
            continue
        # a watch answered 410 (the server restarted)
        if answering_since is None:
            answering_since = t
        fresh = t - answering_since < SETTLE
        if state == "watch" and fresh:
            wait = confirm(backoff)
            if wait is not None:
                t, state = t + wait, "confirm"
                continue
        if state == "confirm" and relist_after_confirm == "now":
            state = "list"
            continue
        if not spread_used:
            spread_used = True
            t += backoff.spread()
        else:
            t += backoff.full()
        state = "list"


def run(name, fleets=60, members=200, seed=1, **rules):
    rng = random.Random(seed)
    rates, recoveries = [], []
    for _ in range(fleets):
        fleet = [member(rng, **rules) for _ in range(members)]
        rates.append(sum(r for r, _ in fleet) / members / HEALTHY)
        recoveries.append(max(t for _, t in fleet) - HEALTHY)
    rates.sort()
    recoveries.sort()
    q = lambda xs: (xs[len(xs) // 10], xs[len(xs) // 2], xs[9 * len(xs) // 10])
    print(
        f"{name:58} requests/client/s {'/'.join(f'{x:.3f}' for x in q(rates))}"
        f"   recovery s {'/'.join(f'{x:.1f}' for x in q(recoveries))}"
    )


def main():
    never = lambda backoff: None
    settle = lambda backoff: SETTLE * (1 + backoff.rng.random())
    run("client-go's rules", confirm=never, relist_after_confirm="step", spread_once=False)
    run("kcontrol's rules (confirm 1-2 s later, spread once)", confirm=settle,
        relist_after_confirm="step", spread_once=True)
    run("  ... a confirmed 410 relists at once", confirm=settle,
        relist_after_confirm="now", spread_once=True)

    def settle_then_skip(backoff):
        backoff.step()  # the confirmation takes a backoff step
        return settle(backoff)

    run("  ... the confirmation takes a backoff step", confirm=settle_then_skip,
        relist_after_confirm="now", spread_once=True)
    run("confirm after a full backoff step, then relist at once",
        confirm=lambda backoff: backoff.full(), relist_after_confirm="now", spread_once=False)
    run("no confirmation, spread once", confirm=never, relist_after_confirm="step",
        spread_once=True)
    run("confirm after a spread step, then relist at once",
        confirm=lambda backoff: backoff.spread(), relist_after_confirm="now", spread_once=False)
    run("confirm after the longer of 1-2 s and a spread step, relist at once",
        confirm=lambda backoff: max(settle(backoff), backoff.spread()),
        relist_after_confirm="now", spread_once=False)


if __name__ == "__main__":
    main()
