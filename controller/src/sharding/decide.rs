//! The sharder's decision for one object: a pure function of the object's
//! shard and drain labels and the live members, so that the move protocol
//! (SH2-SH4 in `DESIGN.md`) is checked by model tests without a server.

use std::collections::BTreeSet;

use super::ring;

/// What the sharder writes on an object (every write is guarded by the
/// object's `resourceVersion`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Nothing to write.
    Keep,
    /// Set the shard label to this member and remove any drain label: the
    /// object had no owner, or its owner's Lease has expired (SH3).
    Assign(String),
    /// Ask the live owner to let go (set the drain label; SH2).
    Drain,
    /// The object's owner is again the one it should be: remove the drain
    /// label (an acknowledgement then fails its precondition).
    Undrain,
}

/// The decision for the object `key` labelled `shard` (its owner, if any)
/// and `draining` (the drain label set), over the `live` members.
pub fn decide(key: &str, shard: Option<&str>, draining: bool, live: &BTreeSet<String>) -> Decision {
    let desired = ring::assign(key, live.iter().map(String::as_str));
    match (shard, desired) {
        // no member alive: nobody to give it to, nobody to take it from
        (_, None) => Decision::Keep,
        // unowned (new, or acknowledged by its old owner): assign (the
        // sharder writes it once the object's children are there)
        (None, Some(to)) => Decision::Assign(to.to_owned()),
        // owner dead (Lease expired or released): it reconciles nothing
        (Some(owner), Some(to)) if !live.contains(owner) => Decision::Assign(to.to_owned()),
        (Some(owner), Some(to)) if owner == to => {
            if draining {
                Decision::Undrain
            } else {
                Decision::Keep
            }
        }
        // a live owner that should not have it: drain, then wait for its
        // acknowledgement (it removes both labels)
        (Some(_), Some(_)) if draining => Decision::Keep,
        (Some(_), Some(_)) => Decision::Drain,
    }
}

/// Where the owner `key` (labelled `shard` and `draining`) is going: the
/// member the sharder assigns it to when its decision is an assignment
/// (it is unowned, or its owner is dead), else its current owner. Its
/// children follow this target, so that they reach the new owner before
/// the owner does (the sharder assigns an owner only once its children
/// carry the target, see `DESIGN.md` SH6).
pub fn owner_target(
    key: &str,
    shard: Option<&str>,
    draining: bool,
    live: &BTreeSet<String>,
) -> Option<String> {
    match decide(key, shard, draining, live) {
        Decision::Assign(to) => Some(to),
        _ => shard.map(str::to_owned),
    }
}

/// Whether the object `key` labelled `shard` and `draining` needs nothing
/// from the sharder over `live`: it is owned, undrained, by the member the
/// ring names, or nobody is live. Such an object's decision is
/// [`Decision::Keep`], and a child labelled `shard` whose controller
/// owner's key is `key` already carries where a settled owner is. The
/// sharder caches only the objects that are not settled: its caches do not
/// grow with the objects it shards, and each change of the live members
/// lists them again.
pub fn settled(key: &str, shard: Option<&str>, draining: bool, live: &BTreeSet<String>) -> bool {
    match ring::assign(key, live.iter().map(String::as_str)) {
        None => true,
        Some(to) => shard == Some(to) && !draining,
    }
}

/// The shard an owned object should carry: its controller owner's target
/// ([`owner_target`]), when the owner has one (`None`: leave the object as
/// it is).
pub fn decide_child(child_shard: Option<&str>, owner_shard: Option<&str>) -> Option<String> {
    match owner_shard {
        Some(owner) if child_shard != Some(owner) => Some(owner.to_owned()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn set(members: &[&str]) -> BTreeSet<String> {
        members.iter().map(|m| (*m).to_owned()).collect()
    }

    #[test]
    fn unowned_objects_are_assigned_and_dead_owners_replaced_at_once() {
        let live = set(&["a", "b"]);
        let to = ring::assign("ns/x", ["a", "b"]).map(str::to_owned);
        assert_eq!(
            decide("ns/x", None, false, &live),
            Decision::Assign(to.clone().unwrap_or_default())
        );
        assert_eq!(
            decide("ns/x", Some("dead"), true, &live),
            Decision::Assign(to.unwrap_or_default())
        );
        assert_eq!(decide("ns/x", None, false, &set(&[])), Decision::Keep);
        assert_eq!(
            decide("ns/x", Some("dead"), false, &set(&[])),
            Decision::Keep
        );
    }

    #[test]
    fn children_follow_their_owner() {
        assert_eq!(decide_child(None, Some("a")), Some("a".to_owned()));
        assert_eq!(decide_child(Some("b"), Some("a")), Some("a".to_owned()));
        assert_eq!(decide_child(Some("a"), Some("a")), None);
        assert_eq!(decide_child(Some("a"), None), None);
    }

    #[test]
    fn children_go_where_their_owner_is_going() {
        let live = set(&["a", "b"]);
        let to = ring::assign("ns/x", ["a", "b"]).unwrap().to_owned();
        let other = if to == "a" { "b" } else { "a" };
        // unowned or owned by a dead member: the member it is assigned to
        assert_eq!(owner_target("ns/x", None, false, &live), Some(to.clone()));
        assert_eq!(
            owner_target("ns/x", Some("dead"), true, &live),
            Some(to.clone())
        );
        // a live owner keeps its children, draining or not, until it lets go
        assert_eq!(
            owner_target("ns/x", Some(other), false, &live),
            Some(other.to_owned())
        );
        assert_eq!(
            owner_target("ns/x", Some(other), true, &live),
            Some(other.to_owned())
        );
        // nobody alive: leave everything where it is
        assert_eq!(owner_target("ns/x", None, false, &set(&[])), None);
        assert_eq!(
            owner_target("ns/x", Some("dead"), false, &set(&[])),
            Some("dead".to_owned())
        );
    }

    /// One object, its labels and who reconciles it, stepped through the
    /// protocol's writes in any order the model allows.
    #[derive(Clone, Debug)]
    struct Model {
        shard: Option<String>,
        draining: bool,
        /// members whose Lease is live (by the sharder's observation)
        live: BTreeSet<String>,
        /// members that have stopped for good (died: they never reconcile
        /// again; their Leases expire later)
        dead: BTreeSet<String>,
        /// the member whose reconcile of the key is in flight, if any
        in_flight: Option<String>,
    }

    #[derive(Clone, Debug)]
    enum Step {
        Sharder,
        Join(u8),
        Die(u8),
        Expire(u8),
        /// the owner starts a reconcile if its cache allows it
        Start(u8),
        Finish,
        /// the owner acknowledges a drain (only when nothing is in flight)
        Ack(u8),
    }

    fn name(i: u8) -> String {
        format!("m{}", i % 5)
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => Just(Step::Sharder),
            1 => any::<u8>().prop_map(Step::Join),
            1 => any::<u8>().prop_map(Step::Die),
            1 => any::<u8>().prop_map(Step::Expire),
            3 => any::<u8>().prop_map(Step::Start),
            2 => Just(Step::Finish),
            2 => any::<u8>().prop_map(Step::Ack),
        ]
    }

    impl Model {
        /// Applies `step`; panics when a reconcile would start while
        /// another member's is in flight (SH2/SH3 violated).
        fn apply(&mut self, step: &Step) {
            match step {
                Step::Sharder => {
                    match decide("ns/key", self.shard.as_deref(), self.draining, &self.live) {
                        Decision::Keep => {}
                        Decision::Assign(to) => {
                            self.shard = Some(to);
                            self.draining = false;
                        }
                        Decision::Drain => self.draining = true,
                        Decision::Undrain => self.draining = false,
                    }
                }
                Step::Join(i) => {
                    if !self.dead.contains(&name(*i)) {
                        self.live.insert(name(*i));
                    }
                }
                Step::Die(i) => {
                    let m = name(*i);
                    self.dead.insert(m.clone());
                    // a dead replica's reconcile ends with it
                    if self.in_flight.as_ref() == Some(&m) {
                        self.in_flight = None;
                    }
                }
                // a Lease expires only for a member that stopped (SH3's
                // clock assumption: it stopped within its renew deadline)
                Step::Expire(i) => {
                    let m = name(*i);
                    if self.dead.contains(&m) {
                        self.live.remove(&m);
                    }
                }
                Step::Start(i) => {
                    let m = name(*i);
                    let owns = self.shard.as_ref() == Some(&m) && !self.draining;
                    if owns && !self.dead.contains(&m) && self.in_flight.is_none() {
                        self.in_flight = Some(m);
                    } else if owns && !self.dead.contains(&m) {
                        assert_eq!(
                            self.in_flight.as_ref(),
                            Some(&m),
                            "two members reconcile one key"
                        );
                    }
                }
                Step::Finish => self.in_flight = None,
                Step::Ack(i) => {
                    let m = name(*i);
                    let mine = self.shard.as_ref() == Some(&m);
                    if mine
                        && self.draining
                        && !self.dead.contains(&m)
                        && self.in_flight.as_ref() != Some(&m)
                    {
                        self.shard = None;
                        self.draining = false;
                    }
                }
            }
        }
    }

    fn members() -> impl Strategy<Value = BTreeSet<String>> {
        proptest::collection::btree_set("m[0-4]", 0..4)
    }

    fn label() -> impl Strategy<Value = Option<String>> {
        proptest::option::of("m[0-5]")
    }

    proptest! {
        /// What the sharder keeps out of its caches needs no write: a
        /// settled object's decision is `Keep`, and a settled child of a
        /// settled owner stays where it is (with nobody live, nothing is
        /// written until a member is: the sharder lists again then).
        #[test]
        fn a_settled_object_and_its_settled_children_need_no_write(
            key in "ns/[a-z]{1,6}",
            shard in label(),
            child in label(),
            draining: bool,
            live in members(),
        ) {
            if settled(&key, shard.as_deref(), draining, &live) {
                prop_assert_eq!(decide(&key, shard.as_deref(), draining, &live), Decision::Keep);
                if !live.is_empty() && settled(&key, child.as_deref(), false, &live) {
                    let to = owner_target(&key, shard.as_deref(), draining, &live);
                    prop_assert_eq!(decide_child(child.as_deref(), to.as_deref()), None);
                }
            } else {
                prop_assert!(!live.is_empty());
            }
        }

        /// SH2/SH3 on the model: whatever the order of joins, deaths, Lease
        /// expiries, reconciles and acknowledgements, a reconcile starts
        /// only when no other member's is in flight; and once membership
        /// settles (the dead expired, someone alive), a few sharder passes
        /// and acknowledgements leave the key owned by the live member
        /// the ring names, not draining (SH4).
        #[test]
        fn sh2_sh3_sh4_one_reconciler_at_a_time_and_an_owner_in_the_end(
            steps in proptest::collection::vec(step(), 1..200),
        ) {
            let mut model = Model {
                shard: None,
                draining: false,
                live: set(&["m0"]),
                dead: BTreeSet::new(),
                in_flight: None,
            };
            for s in &steps {
                model.apply(s);
            }
            // settle: every dead member expires, one member is alive
            let dead: Vec<String> = model.dead.iter().cloned().collect();
            for m in dead {
                model.live.remove(&m);
            }
            if model.live.is_empty() {
                model.live.insert("survivor".to_owned());
            }
            model.in_flight = None;
            for _ in 0..3 {
                model.apply(&Step::Sharder);
                // the live owner acknowledges the drain
                if model.draining {
                    model.shard = None;
                    model.draining = false;
                }
            }
            let desired = ring::assign("ns/key", model.live.iter().map(String::as_str)).map(str::to_owned);
            prop_assert_eq!(model.shard.clone(), desired);
            prop_assert!(!model.draining);
        }
    }
}
