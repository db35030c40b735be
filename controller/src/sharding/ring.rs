//! Assignment of object keys to ring members by rendezvous hashing
//! (highest random weight): each key goes to the member whose
//! `hash(member, key)` is largest.
//!
//! Rendezvous hashing needs no virtual nodes for an even spread, and a
//! change of membership moves only the keys it must (SH1): when a member
//! joins, exactly the keys whose new weight beats every old one move, all
//! of them to the newcomer (about 1/N of them with N members after the
//! join); when a member leaves, only its keys move. The hash is FNV-1a
//! followed by a SplitMix64 finaliser: fixed, so every sharder of every
//! version agrees on the assignment.

/// FNV-1a 64 offset basis.
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
/// FNV-1a 64 prime.
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// The weight of `key` on `member`.
pub fn weight(member: &str, key: &str) -> u64 {
    let mut hash = FNV_OFFSET;
    for byte in member
        .as_bytes()
        .iter()
        .chain(&[0xff])
        .chain(key.as_bytes())
    {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(FNV_PRIME);
    }
    // SplitMix64's finaliser: FNV's low bits alone spread poorly
    hash ^= hash >> 30;
    hash = hash.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    hash ^= hash >> 27;
    hash = hash.wrapping_mul(0x94d0_49bb_1331_11eb);
    hash ^ (hash >> 31)
}

/// The member `key` is assigned to: the one of highest weight (ties, which
/// need a 64-bit collision, go to the smaller name); `None` when there are
/// no members.
pub fn assign<'a, I>(key: &str, members: I) -> Option<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    members
        .into_iter()
        .map(|m| (weight(m, key), m))
        .max_by(|a, b| a.0.cmp(&b.0).then_with(|| b.1.cmp(a.1)))
        .map(|(_, m)| m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn keys(seed: u64, n: usize) -> Vec<String> {
        (0..n)
            .map(|i| format!("ns-{}/foo-{seed}-{i}", i % 7))
            .collect()
    }

    #[test]
    fn no_members_no_owner_and_one_member_owns_everything() {
        assert_eq!(assign("ns/a", std::iter::empty()), None);
        assert_eq!(assign("ns/a", ["only"]), Some("only"));
    }

    #[test]
    fn the_assignment_does_not_depend_on_the_members_order() {
        let members = ["a", "b", "c", "d"];
        let reversed = ["d", "c", "b", "a"];
        for key in keys(1, 500) {
            assert_eq!(assign(&key, members), assign(&key, reversed));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// SH1: a member joining N members moves 1/(N+1) of the keys
        /// (± 20 %), every one of them to the newcomer; the others stay.
        #[test]
        fn sh1_a_join_moves_one_nth_of_the_keys_all_to_the_newcomer(
            members in proptest::collection::btree_set("[a-z0-9-]{3,20}", 1..9),
            newcomer in "[a-z0-9-]{3,20}",
            seed in any::<u64>(),
        ) {
            prop_assume!(!members.contains(&newcomer));
            let before: Vec<&str> = members.iter().map(String::as_str).collect();
            let mut after = before.clone();
            after.push(&newcomer);
            let keys = keys(seed, 10_000);
            let mut moved = 0usize;
            for key in &keys {
                let old = assign(key, before.iter().copied());
                let new = assign(key, after.iter().copied());
                if old != new {
                    prop_assert_eq!(new, Some(newcomer.as_str()));
                    moved += 1;
                }
            }
            let fraction = moved as f64 / keys.len() as f64;
            let ideal = 1.0 / after.len() as f64;
            prop_assert!(
                (fraction - ideal).abs() <= 0.2 * ideal,
                "moved {fraction:.4}, ideal {ideal:.4} with {} members", after.len()
            );
        }

        /// SH1: a member leaving moves only its own keys.
        #[test]
        fn sh1_a_leave_moves_only_the_leavers_keys(
            members in proptest::collection::btree_set("[a-z0-9-]{3,20}", 2..9),
            seed in any::<u64>(),
        ) {
            let all: Vec<&str> = members.iter().map(String::as_str).collect();
            let leaver = all[0];
            let rest: Vec<&str> = all[1..].to_vec();
            for key in keys(seed, 2_000) {
                let old = assign(&key, all.iter().copied());
                let new = assign(&key, rest.iter().copied());
                if old != Some(leaver) {
                    prop_assert_eq!(old, new);
                }
            }
        }
    }
}
