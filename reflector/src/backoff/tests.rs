//! The pacing rules, each pinned to what it reproduces: client-go's
//! (`k8s.io/apimachinery/pkg/util/wait/backoff.go`,
//! `k8s.io/client-go/tools/cache/reflector.go`) for the preset, RF5 for
//! kcontrol's.

use super::*;

fn config() -> BackoffConfig {
    BackoffConfig {
        initial: Duration::from_millis(800),
        max: Duration::from_secs(30),
        reset_after: Duration::from_secs(120),
        jitter: 1.0,
    }
}

fn ms(d: Duration) -> u128 {
    d.as_millis()
}

#[test]
fn rf5_doubles_from_initial_to_the_cap() {
    // client-go: wait.Backoff{Duration: 800ms, Factor: 2, Cap: 30s}
    let mut b = Backoff::new(config());
    let t = Instant::now();
    let waits: Vec<u128> = (0..8)
        .map(|i| ms(b.next_delay_with(t + Duration::from_secs(i), 0.0)))
        .collect();
    assert_eq!(waits, [800, 1600, 3200, 6400, 12800, 25600, 30000, 30000]);
}

#[test]
fn rf5_jitter_adds_up_to_the_jitter_fraction() {
    // client-go: wait.Jitter(duration, 1.0) = duration + rand × duration
    let t = Instant::now();
    for (r, want) in [(0.0, 800), (0.5, 1200), (0.999, 1599)] {
        let mut b = Backoff::new(config());
        assert_eq!(ms(b.next_delay_with(t, r)), want);
    }
    let mut none = Backoff::new(BackoffConfig {
        jitter: 0.0,
        ..config()
    });
    assert_eq!(ms(none.next_delay_with(t, 0.9)), 800);
    let mut bad = Backoff::new(BackoffConfig {
        jitter: f64::NAN,
        ..config()
    });
    assert_eq!(ms(bad.next_delay_with(t, 0.9)), 800);
}

#[test]
fn rf5_resets_only_after_a_quiet_period() {
    // client-go (NewExponentialBackoffManager.getNextBackoff): back to the
    // initial backoff when more than 2 minutes passed since the last one
    let mut b = Backoff::new(config());
    let t = Instant::now();
    for i in 0..5 {
        b.next_delay_with(t + Duration::from_secs(i), 0.0);
    }
    // within the quiet period: still growing
    assert_eq!(
        ms(b.next_delay_with(t + Duration::from_secs(100), 0.0)),
        25600
    );
    assert_eq!(
        ms(b.next_delay_with(t + Duration::from_secs(221), 0.0)),
        800
    );
    assert_eq!(
        ms(b.next_delay_with(t + Duration::from_secs(222), 0.0)),
        1600
    );
}

#[test]
fn rf5_a_spread_step_covers_the_same_window_from_zero() {
    let t = Instant::now();
    let mut b = Backoff::new(config());
    for _ in 0..3 {
        b.next_delay_with(t, 0.0);
    }
    // the fourth step's base is 6.4 s: a full step lies in [6.4, 12.8),
    // a spread in [0, 6.4); either way the next base is 12.8 s
    assert_eq!(ms(b.next_spread_with(t, 0.0)), 0);
    assert_eq!(ms(b.next_delay_with(t, 0.0)), 12800);
    let mut c = Backoff::new(config());
    assert_eq!(ms(c.next_spread_with(t, 0.5)), 400);
    assert_eq!(ms(c.next_spread_with(t, 0.999)), 1598);
}

#[test]
fn client_go_preset_ignores_the_wait_the_server_asked_for() {
    // client-go's reflector backs off with its delay handler alone; only
    // its REST client honours Retry-After (crate::retry)
    let mut p = Pacing::new(PacingPreset::ClientGo, config());
    let t = Instant::now();
    let five = Duration::from_secs(5);
    assert_eq!(
        ms(p.after_failure_with(Failure::ServerAsked(five), t, 0.0)),
        800
    );
    assert_eq!(
        ms(p.after_failure_with(Failure::ServerAsked(five), t, 0.0)),
        1600
    );
}

#[test]
fn client_go_preset_waits_a_full_step_before_every_relist() {
    // RunWithContext: delayHandler.Until(ctx, immediate, sliding=true, ...)
    // waits a step after every ListAndWatch, whatever ended it
    let mut p = Pacing::new(PacingPreset::ClientGo, config());
    let t = Instant::now();
    let waits: Vec<u128> = [Failure::Unreachable, Failure::Unreachable, Failure::Expired]
        .into_iter()
        .map(|f| ms(p.after_failure_with(f, t, 0.0)))
        .collect();
    assert_eq!(waits, [800, 1600, 3200]);
}

#[test]
fn rf5_a_wait_the_server_asks_for_is_a_floor_under_a_growing_backoff() {
    let mut p = Pacing::new(PacingPreset::Kcontrol, config());
    let t = Instant::now();
    let one = Duration::from_secs(1);
    // the same failure repeating: never shorter than asked, and the
    // backoff grows beneath it until it is the longer wait
    let waits: Vec<u128> = (0..5)
        .map(|_| ms(p.after_failure_with(Failure::ServerAsked(one), t, 0.0)))
        .collect();
    assert_eq!(waits, [1000, 1600, 3200, 6400, 12800]);
    let mut q = Pacing::new(PacingPreset::Kcontrol, config());
    assert_eq!(
        ms(q.after_failure_with(Failure::ServerAsked(Duration::from_secs(5)), t, 0.0)),
        5000
    );
}

#[test]
fn rf5_the_relist_after_an_outage_spreads_over_the_backoff_once() {
    let mut p = Pacing::new(PacingPreset::Kcontrol, config());
    let t = Instant::now();
    for _ in 0..3 {
        p.after_failure_with(Failure::Unreachable, t, 0.0);
    }
    // base 6.4 s: a spread in [0, 6.4) instead of a wait in [6.4, 12.8)
    assert_eq!(ms(p.after_failure_with(Failure::Expired, t, 0.5)), 3200);
    // once per outage: a 410 again right after it waits a full step
    assert_eq!(ms(p.after_failure_with(Failure::Expired, t, 0.0)), 12800);
}

#[test]
fn rf5_a_410_without_an_outage_waits_a_full_step() {
    let mut p = Pacing::new(PacingPreset::Kcontrol, config());
    let t = Instant::now();
    assert_eq!(ms(p.after_failure_with(Failure::Expired, t, 0.5)), 1200);
    // an outage that a watch delivering events has ended does not count
    p.after_failure_with(Failure::Unreachable, t, 0.0);
    p.progressed();
    assert_eq!(ms(p.after_failure_with(Failure::Expired, t, 0.0)), 3200);
    // waits asked for at the request level are an outage too
    p.server_asked();
    assert_eq!(ms(p.after_failure_with(Failure::Expired, t, 0.0)), 0);
}

#[test]
fn rf5_a_flapping_server_does_not_get_the_backoff_back_to_the_start() {
    // each flap: refused, then the 410 relist; the refusals go on from the
    // grown backoff, never from 0.8 s again until a quiet period
    let mut p = Pacing::new(PacingPreset::Kcontrol, config());
    let t = Instant::now();
    let mut refused = Vec::new();
    for flap in 0..3u64 {
        let now = t + Duration::from_secs(3 * flap);
        refused.push(ms(p.after_failure_with(Failure::Unreachable, now, 0.0)));
        p.after_failure_with(Failure::Expired, now, 0.0);
    }
    assert_eq!(refused, [800, 3200, 12800]);
}

#[test]
fn rf5_a_flapping_server_gets_one_spread_relist_per_backoff_period() {
    // each flap: refused, then the 410 relist; only the first return in a
    // backoff period is spread, the next ones wait full steps (client-go's)
    let mut p = Pacing::new(PacingPreset::Kcontrol, config());
    let t = Instant::now();
    let mut relists = Vec::new();
    for flap in 0..3u64 {
        let now = t + Duration::from_secs(3 * flap);
        p.after_failure_with(Failure::Unreachable, now, 0.0);
        relists.push(ms(p.after_failure_with(Failure::Expired, now, 0.0)));
    }
    // bases: refused 0.8, spread of 1.6 (0 at r=0); refused 3.2, full 6.4;
    // refused 12.8, full 25.6
    assert_eq!(relists, [0, 6400, 25600]);
    // a quiet period later the backoff starts over, and with it the spread
    let later = t + Duration::from_secs(6 + 121);
    p.after_failure_with(Failure::Unreachable, later, 0.0);
    assert_eq!(ms(p.after_failure_with(Failure::Expired, later, 0.5)), 800);
}

#[test]
fn rf5_a_410_right_after_refusals_is_confirmed_before_the_relist() {
    let mut p = Pacing::new(PacingPreset::Kcontrol, config());
    let t = Instant::now();
    let at = |ms: u64| t + Duration::from_millis(ms);
    // no outage: a 410 relists (after the wait `after_failure` gives)
    assert_eq!(p.confirm_with(Failure::Expired, t, 0.0), None);
    p.after_failure_with(Failure::Unreachable, t, 0.0);
    assert_eq!(p.confirm_with(Failure::Unreachable, t, 0.0), None);
    // the server's first answer after refusing is a 410: the same watch
    // again a second later, jittered up to two
    assert_eq!(
        p.confirm_with(Failure::Expired, at(100), 0.5).map(ms),
        Some(1500)
    );
    // a second 410 sooner than a second after the first: again
    assert!(p.confirm_with(Failure::Expired, at(900), 0.0).is_some());
    // a second after the first answer: relist, spread over the backoff
    assert_eq!(p.confirm_with(Failure::Expired, at(1100), 0.0), None);
    assert_eq!(ms(p.after_failure_with(Failure::Expired, at(1100), 0.0)), 0);
    // the relist ended the outage: the next 410 is not confirmed
    assert_eq!(p.confirm_with(Failure::Expired, at(1200), 0.0), None);
}

#[test]
fn rf5_a_server_answering_for_a_second_before_its_410_is_not_confirmed() {
    // a restart: refused, then 503s and 429s (waits asked, answered) for
    // more than a second, then the 410
    let mut p = Pacing::new(PacingPreset::Kcontrol, config());
    let t = Instant::now();
    p.after_failure_with(Failure::Unreachable, t, 0.0);
    p.after_failure_with(Failure::ServerAsked(Duration::from_secs(1)), t, 0.0);
    let later = t + Duration::from_secs(3);
    assert_eq!(p.confirm_with(Failure::Expired, later, 0.0), None);
    // waits asked without a refusal: the server never went away
    let mut q = Pacing::new(PacingPreset::Kcontrol, config());
    q.server_asked();
    assert_eq!(q.confirm_with(Failure::Expired, Instant::now(), 0.0), None);
}

#[test]
fn rf5_a_confirmation_refused_is_asked_again_at_the_next_410() {
    let mut p = Pacing::new(PacingPreset::Kcontrol, config());
    let t = Instant::now();
    p.after_failure_with(Failure::Unreachable, t, 0.0);
    assert!(p.confirm_with(Failure::Expired, t, 0.0).is_some());
    // the confirming watch refused: the server fell over again, and the
    // backoff goes on growing
    let next = t + Duration::from_secs(1);
    assert_eq!(
        ms(p.after_failure_with(Failure::Unreachable, next, 0.0)),
        1600
    );
    let back = t + Duration::from_secs(3);
    assert_eq!(
        p.confirm_with(Failure::Expired, back, 0.0).map(ms),
        Some(1000)
    );
    // a watch delivering events ends the outage: nothing to confirm
    p.progressed();
    assert_eq!(p.confirm_with(Failure::Expired, back, 0.0), None);
}

#[test]
fn client_go_preset_relists_after_a_410_without_confirming() {
    let mut p = Pacing::new(PacingPreset::ClientGo, config());
    let t = Instant::now();
    p.after_failure_with(Failure::Unreachable, t, 0.0);
    assert_eq!(p.confirm_with(Failure::Expired, t, 0.0), None);
}

#[test]
fn rf3_watch_timeouts_lie_in_min_to_twice_min() {
    let five = Duration::from_secs(300);
    assert_eq!(watch_timeout_seconds(five, 0.0), 300);
    assert_eq!(watch_timeout_seconds(five, 0.5), 450);
    assert_eq!(watch_timeout_seconds(five, 0.999_999), 599);
    assert_eq!(watch_timeout_seconds(five, 1.0), 599);
    assert_eq!(watch_timeout_seconds(five, f64::NAN), 300);
    assert_eq!(watch_timeout_seconds(Duration::from_millis(10), 0.7), 1);
    for i in 0..1000 {
        let t = watch_timeout_seconds(five, f64::from(i) / 1000.0);
        assert!((300..600).contains(&t), "{t}");
    }
    // the random source covers the range
    let seen: std::collections::BTreeSet<u32> = (0..2000)
        .map(|_| watch_timeout_seconds(five, rand::random::<f64>()) / 60)
        .collect();
    assert_eq!(seen, (5..10).collect());
}
