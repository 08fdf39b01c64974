//! The two inner loops of the vector scan, chosen once for the CPU at run time: the
//! Hamming distances over the sign bits and the int8 dot products over the codes.
//!
//! A release build targets baseline x86-64 (SSE2, no `popcnt`), so the portable loops
//! compile to SSE2 `pmaddwd` and a popcount made of bit tricks. On a CPU that has them,
//! the same loops are compiled a second time with AVX2 (32-byte `vpmaddwd`) and with
//! `popcnt`, and [`kernels`] picks them the first time it is asked (std's
//! `is_x86_feature_detected!`). The loops are one body (`#[inline(always)]`) compiled
//! under each feature set, and integer sums do not depend on their order (wrapping
//! addition is associative), so every variant gives exactly the portable results
//! (`tests::every_variant_equals_the_portable_loops`). Other architectures (aarch64)
//! use the portable loops.
//!
//! `avx2-prefetch` is the AVX2 loop that also asks for the codes of the vector a few
//! positions ahead before it reads them (`_mm_prefetch`: a hint, the same results); the
//! int8 pass's positions are scattered, so the hardware prefetcher does not see them
//! coming. Which variant [`kernels`] picks is [`BEST_NAME`] (measured in `doc/memory.md`).
//!
//! The only `unsafe` of the crate is here: calling a `#[target_feature]` function, which
//! is sound once the CPU is known to have the feature, and the prefetch hint.
#![allow(unsafe_code)]

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

/// `out[j]` = the dot product of `q` and the codes of vector `pool[j]` (its `q.len()`
/// bytes at `pool[j] * q.len()` in `codes`).
type DotFn = fn(q: &[i8], codes: &[i8], pool: &[usize], out: &mut [i32]);

/// The scan's inner loops, one variant for a CPU.
#[derive(Clone, Copy)]
pub(super) struct Kernels {
    /// What the variant is compiled for: `portable`, `avx2`.
    pub(super) name: &'static str,
    /// `out[i]` = the Hamming distance between `q` and the `i`-th `q.len()` words of
    /// `bits` (`bits.len() == out.len() * q.len()`).
    pub(super) hamming: fn(q: &[u64], bits: &[u64], out: &mut [u32]),
    /// See [`DotFn`].
    pub(super) dot: DotFn,
}

/// The portable loops (what a baseline build vectorises with SSE2).
pub(super) const PORTABLE: Kernels = Kernels {
    name: "portable",
    hamming: hamming_portable,
    dot: dot_portable,
};

/// When not 0, [`kernels`] gives the variant at this index minus one of [`available`]
/// whatever is best: to measure the difference in one process (the benches).
static FORCED: AtomicUsize = AtomicUsize::new(0);

/// Makes [`kernels`] give the portable loops (`true`) or the CPU's best (`false`).
pub(crate) fn force_portable(yes: bool) {
    FORCED.store(usize::from(yes), Ordering::Relaxed);
}

/// Makes [`kernels`] give the variant named `name` (`portable`, `avx2`,
/// `avx2-prefetch`), or the CPU's best for `best`; false if this CPU has no such
/// variant (nothing changes then).
pub(crate) fn force(name: &str) -> bool {
    if name == "best" {
        FORCED.store(0, Ordering::Relaxed);
        return true;
    }
    match all().iter().position(|k| k.name == name) {
        Some(i) => {
            FORCED.store(i + 1, Ordering::Relaxed);
            true
        }
        None => false,
    }
}

/// [`available`], detected once.
fn all() -> &'static [Kernels] {
    static ALL: OnceLock<Vec<Kernels>> = OnceLock::new();
    ALL.get_or_init(available)
}

/// The best loops for this CPU, detected once.
pub(super) fn kernels() -> Kernels {
    static BEST: OnceLock<Kernels> = OnceLock::new();
    let forced = FORCED.load(Ordering::Relaxed);
    if forced > 0 {
        return all().get(forced - 1).copied().unwrap_or(PORTABLE);
    }
    *BEST.get_or_init(|| {
        let best = all().iter().rev().find(|k| k.name == BEST_NAME).copied();
        let best = best.or_else(|| all().last().copied()).unwrap_or(PORTABLE);
        tracing::debug!(kernels = best.name, "the vector scan's loops");
        best
    })
}

/// The variant [`kernels`] picks when the CPU has it (else the last of [`available`]).
const BEST_NAME: &str = "avx2-prefetch";

/// Every variant this CPU can run, the portable one first.
pub(super) fn available() -> Vec<Kernels> {
    #[allow(unused_mut)] // only x86-64 adds any
    let mut out = vec![PORTABLE];
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("popcnt")
    {
        out.push(x86::AVX2);
        out.push(x86::AVX2_PREFETCH);
    }
    out
}

/// The dot product of two int8 vectors (as long as the shorter one), in `L` lanes of
/// `i32` so that the compiler vectorises it (`pmaddwd`).
#[inline(always)]
fn dot_lanes<const L: usize>(a: &[i8], b: &[i8]) -> i32 {
    let (ca, cb) = (a.chunks_exact(L), b.chunks_exact(L));
    let tail = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .fold(0i32, |s, (x, y)| {
            s.wrapping_add(i32::from(*x) * i32::from(*y))
        });
    let mut lanes = [0i32; L];
    for (x, y) in ca.zip(cb) {
        for j in 0..L {
            lanes[j] = lanes[j].wrapping_add(i32::from(x[j]) * i32::from(y[j]));
        }
    }
    lanes.iter().fold(tail, |s, l| s.wrapping_add(*l))
}

/// [`DotFn`] in `L` lanes; with `AHEAD` > 0, each vector's cache lines are asked for
/// (a prefetch) `AHEAD` vectors before they are read: the positions are known in
/// advance and scattered, so the hardware prefetcher (which follows a stream within a
/// 4 KB page) does not fetch them.
#[inline(always)]
fn dot_pool<const L: usize, const AHEAD: usize>(
    q: &[i8],
    codes: &[i8],
    pool: &[usize],
    out: &mut [i32],
) {
    let d = q.len();
    for (j, (o, &i)) in out.iter_mut().zip(pool).enumerate() {
        if AHEAD > 0
            && let Some(&next) = pool.get(j + AHEAD)
            && let Some(v) = codes.get(next * d..(next + 1) * d)
        {
            prefetch(v);
        }
        *o = dot_lanes::<L>(q, &codes[i * d..(i + 1) * d]);
    }
}

/// Asks for `bytes`' cache lines (64 bytes each) to be brought into the caches; a hint
/// that reads nothing (nothing but x86-64 has one here).
#[inline(always)]
fn prefetch(bytes: &[i8]) {
    #[cfg(target_arch = "x86_64")]
    for line in bytes.chunks(64) {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: a prefetch is a hint: it does not read the memory into the program
        // (no fault, no value), and the pointer is into `bytes` anyway.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(line.as_ptr()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}

#[inline(always)]
fn hamming_all(q: &[u64], bits: &[u64], out: &mut [u32]) {
    let w = q.len();
    if w == 0 {
        out.fill(0);
        return;
    }
    for (o, b) in out.iter_mut().zip(bits.chunks_exact(w)) {
        *o = q.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum();
    }
}

fn hamming_portable(q: &[u64], bits: &[u64], out: &mut [u32]) {
    hamming_all(q, bits, out);
}

fn dot_portable(q: &[i8], codes: &[i8], pool: &[usize], out: &mut [i32]) {
    dot_pool::<16, 0>(q, codes, pool, out);
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{Kernels, dot_pool, hamming_all};

    /// The loops compiled with AVX2 and `popcnt`: only for a CPU that has both
    /// ([`super::available`] checks).
    pub(super) const AVX2: Kernels = Kernels {
        name: "avx2",
        hamming,
        dot,
    };

    #[target_feature(enable = "popcnt")]
    fn hamming_popcnt(q: &[u64], bits: &[u64], out: &mut [u32]) {
        hamming_all(q, bits, out);
    }

    #[target_feature(enable = "avx2")]
    fn dot_avx2(q: &[i8], codes: &[i8], pool: &[usize], out: &mut [i32]) {
        dot_pool::<32, 0>(q, codes, pool, out);
    }

    #[target_feature(enable = "avx2")]
    fn dot_avx2_prefetch(q: &[i8], codes: &[i8], pool: &[usize], out: &mut [i32]) {
        dot_pool::<32, PREFETCH_AHEAD>(q, codes, pool, out);
    }

    /// How many vectors ahead [`AVX2_PREFETCH`] asks for the codes.
    const PREFETCH_AHEAD: usize = 4;

    /// [`AVX2`] with the next vectors' codes prefetched.
    pub(super) const AVX2_PREFETCH: Kernels = Kernels {
        name: "avx2-prefetch",
        hamming,
        dot: dot_prefetch,
    };

    fn dot_prefetch(q: &[i8], codes: &[i8], pool: &[usize], out: &mut [i32]) {
        // SAFETY: `AVX2_PREFETCH`, the only place this function is named, is handed out
        // by `available` only after `is_x86_feature_detected!("avx2")` said yes.
        unsafe { dot_avx2_prefetch(q, codes, pool, out) }
    }

    fn hamming(q: &[u64], bits: &[u64], out: &mut [u32]) {
        // SAFETY: `AVX2`, the only place this function is named, is handed out by
        // `available` only after `is_x86_feature_detected!("popcnt")` said yes.
        unsafe { hamming_popcnt(q, bits, out) }
    }

    fn dot(q: &[i8], codes: &[i8], pool: &[usize], out: &mut [i32]) {
        // SAFETY: `AVX2`, the only place this function is named, is handed out by
        // `available` only after `is_x86_feature_detected!("avx2")` said yes.
        unsafe { dot_avx2(q, codes, pool, out) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// xorshift bytes: every value of -128..=127 turns up.
    fn bytes(seed: u64, len: usize) -> Vec<i8> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..len)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 56) as u8 as i8
            })
            .collect()
    }

    fn plain_dot(a: &[i8], b: &[i8]) -> i32 {
        a.iter()
            .zip(b)
            .map(|(x, y)| i32::from(*x) * i32::from(*y))
            .sum()
    }

    #[test]
    fn dot_i8_equals_the_plain_sum_at_every_length() {
        for len in [0, 1, 15, 16, 17, 384, 385] {
            let a: Vec<i8> = (0..len).map(|i| (i * 37 % 255) as i8).collect();
            let b: Vec<i8> = (0..len).map(|i| (i * 91 % 253) as i8).collect();
            let plain: i32 = a
                .iter()
                .zip(&b)
                .map(|(x, y)| i32::from(*x) * i32::from(*y))
                .sum();
            for k in available() {
                let mut got = [0];
                (k.dot)(&a, &b, &[0], &mut got);
                assert_eq!(got[0], plain, "{} {len}", k.name);
            }
        }
    }

    #[test]
    fn every_variant_equals_the_portable_loops() {
        let all = available();
        assert_eq!(all[0].name, "portable");
        for len in [
            0, 1, 7, 15, 16, 17, 31, 32, 33, 63, 100, 384, 385, 512, 1023,
        ] {
            let n = 9;
            let mut codes = Vec::new();
            for v in 0..n {
                codes.extend(match v {
                    0 => vec![-128; len],
                    1 => vec![127; len],
                    2 => (0..len)
                        .map(|i| if i % 2 == 0 { -128 } else { 127 })
                        .collect(),
                    _ => bytes(v as u64 * 1000 + len as u64, len),
                });
            }
            let pool: Vec<usize> = (0..n).rev().chain([0, 0, 1]).collect();
            for q in [vec![-128i8; len], vec![127; len], bytes(len as u64, len)] {
                let want: Vec<i32> = pool
                    .iter()
                    .map(|&i| plain_dot(&q, &codes[i * len..(i + 1) * len]))
                    .collect();
                for k in &all {
                    let mut got = vec![0; pool.len()];
                    (k.dot)(&q, &codes, &pool, &mut got);
                    assert_eq!(got, want, "{} dot, length {len}", k.name);
                }
            }
            let words = len.div_ceil(64);
            let as_words = |b: Vec<i8>| -> Vec<u64> {
                b.chunks(8)
                    .map(|c| c.iter().fold(0u64, |w, x| (w << 8) | u64::from(*x as u8)))
                    .collect()
            };
            let bits = as_words(bytes(len as u64 + 7, words * n * 8));
            for q in [
                vec![0u64; words],
                vec![u64::MAX; words],
                as_words(bytes(3, words * 8)),
            ] {
                let want: Vec<u32> = bits
                    .chunks(words.max(1))
                    .take(if words == 0 { 0 } else { n })
                    .map(|b| q.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum())
                    .collect();
                for k in &all {
                    let mut got = vec![0; want.len()];
                    (k.hamming)(&q, &bits, &mut got);
                    assert_eq!(got, want, "{} hamming, {words} words", k.name);
                }
            }
        }
    }

    #[test]
    fn forcing_the_portable_loops_is_seen_and_undone() {
        force_portable(true);
        assert_eq!(kernels().name, "portable");
        force_portable(false);
        let best = available()
            .iter()
            .rev()
            .find(|k| k.name == BEST_NAME)
            .or(available().last())
            .map(|k| k.name);
        assert_eq!(Some(kernels().name), best);
        assert!(force("portable"));
        assert_eq!(kernels().name, "portable");
        assert!(!force("no such loops"));
        assert_eq!(kernels().name, "portable");
        assert!(force("best"));
        assert_eq!(Some(kernels().name), best);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn an_avx2_machine_gets_the_avx2_loops() {
        if std::arch::is_x86_feature_detected!("avx2") {
            assert!(available().iter().any(|k| k.name == "avx2"));
        }
    }
}
