//! `jitter`: a fixed offset per routine, so routines written for the same
//! minute do not all fire in the same instant. The offset comes from the
//! routine's id alone (a hash written out here, not std's `Hasher`, whose
//! output may change between Rust releases), so every process and every
//! restart computes the same one; the slot keeps its unjittered time.

use std::time::Duration;

use uuid::Uuid;

/// The offset in `[0, bound)` of the routine with this id, to the
/// microsecond (the store's resolution).
pub fn offset(id: Uuid, bound: Duration) -> Duration {
    let micros = u64::try_from(bound.as_micros()).unwrap_or(u64::MAX);
    if micros == 0 {
        return Duration::ZERO;
    }
    let bits = id.as_u128();
    // Both halves mixed: a v7 id's high half is mostly its creation time.
    let high = u64::try_from(bits >> 64).unwrap_or(0);
    let low = u64::try_from(bits & u128::from(u64::MAX)).unwrap_or(0);
    let hash = mix(mix(high) ^ low);
    Duration::from_micros(hash % micros)
}

/// SplitMix64's finalizer: every input bit moves every output bit.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn the_offset_is_fixed_for_an_id_and_within_the_bound() {
        let id = Uuid::parse_str("0190f5a2-7c4e-7b3a-9d2e-5f1a2b3c4d5e").unwrap();
        let bound = Duration::from_secs(30);
        // A known value (checked with a Python SplitMix64): a change of hash
        // would move every routine's fires.
        assert_eq!(offset(id, bound), Duration::from_micros(28_484_212));
        assert_eq!(offset(id, bound), offset(id, bound));
        assert_eq!(offset(id, Duration::ZERO), Duration::ZERO);
    }

    #[test]
    fn offsets_spread_over_the_bound() {
        let bound = Duration::from_secs(60);
        let mut buckets = [0u32; 6];
        for _ in 0..6000 {
            let o = offset(Uuid::now_v7(), bound);
            assert!(o < bound);
            buckets[(o.as_secs() / 10) as usize] += 1;
        }
        // Ids made within the same millisecond still land everywhere.
        assert!(buckets.iter().all(|n| *n > 800), "{buckets:?}");
    }
}
