//! The in-memory copy of a store's vectors that vector search scans.
//!
//! sqlite-vec's `vec0` finds the nearest vectors by reading every float vector: 1.5 KB
//! each for 384 dimensions, 150 MB per query at 100k chunks. This copy holds, per
//! vector, int8 codes (one byte per dimension, scaled by the vector's largest component)
//! and the signs of the vector minus the mean of all vectors (one bit per dimension).
//! A search ranks by Hamming distance over the bits, keeps the best quarter (at least
//! [`FULL_SCAN_UP_TO`]), ranks those
//! by the int8 dot product, and hands the best few to the store, which re-scores them with
//! the float vectors: the scores and the order the caller sees are exact. The best
//! quarter is found by counting the distances (at most one per bit), not by sorting, and
//! the two passes run the loops of [`kernels`] the CPU has (AVX2 and `popcnt` on most
//! x86-64), split over the cores. The int8 codes live in memory advised for transparent
//! huge pages ([`huge`]): the int8 pass reads them at scattered positions, and with 4 KB
//! pages nearly every vector it reads costs a page walk.
//!
//! Why centred signs: sentence embeddings share a large common direction (the mean of
//! e5's vectors has norm 0.92), so the signs of the raw vectors say little; the signs of
//! what differs from the mean do. On 3,000 really embedded texts with the bits forced
//! (`benches/memory_recall.rs`), the candidates hold 99.7% of the exact top 10 for the
//! retrieval test set's questions and 100% for 200 other queries (raw signs did far
//! worse in the same experiment).
//!
//! The int8 codes are also stored (`chunks_codes`), so loading the copy reads about 400
//! bytes a vector, not the float vectors. Stores of up to [`FULL_SCAN_UP_TO`] vectors are
//! ranked by int8 whole, without the bits. The copy costs about 440 bytes a vector (44 MB
//! at 100k) and is kept in step with the store: the store's own writes update it after
//! they commit; a change committed by another connection (another process) is seen
//! through `PRAGMA data_version` and the copy is loaded again.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::OnceLock;

mod huge;
mod kernels;

pub(crate) use huge::use_huge_pages;
pub(crate) use kernels::{force as force_kernels, force_portable as force_portable_kernels};

/// Stores up to this many vectors are ranked by int8 whole, without the bits.
pub(super) const FULL_SCAN_UP_TO: usize = 16_384;

/// Above [`FULL_SCAN_UP_TO`], the bits keep this share of the vectors (1 / 4) for int8
/// ranking, and at least [`FULL_SCAN_UP_TO`] of them.
const BITS_KEEP_DIVISOR: usize = 4;

/// [`BITS_KEEP_DIVISOR`] unless a bench set another ([`set_keep_divisor`]).
static KEEP_DIVISOR: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(BITS_KEEP_DIVISOR);

/// Makes the bits keep `1 / divisor` of the vectors (at least 1): to measure what recall
/// another share costs, in one process (the benches).
pub(crate) fn set_keep_divisor(divisor: usize) {
    KEEP_DIVISOR.store(divisor.max(1), std::sync::atomic::Ordering::Relaxed);
}

/// See the module docs.
pub struct VectorCache {
    dims: usize,
    /// Up to this many vectors no bits are used ([`FULL_SCAN_UP_TO`]).
    full_scan_up_to: usize,
    /// `u64` words of bits per vector.
    words: usize,
    /// `PRAGMA data_version` when loaded.
    version: i64,
    ids: Vec<i64>,
    pos: HashMap<i64, usize>,
    /// The int8 codes, `dims` a vector, in huge pages where the platform has them.
    codes: huge::Codes,
    scales: Vec<f32>,
    /// The running sum of the vectors (as their codes say), for the centre.
    sum: Vec<f64>,
    /// The centre the bits are taken against; empty until the store is big enough.
    center: Vec<f32>,
    /// How many vectors there were when the centre was taken.
    centered_at: usize,
    bits: Vec<u64>,
}

impl std::fmt::Debug for VectorCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VectorCache")
            .field("dims", &self.dims)
            .field("len", &self.ids.len())
            .field("version", &self.version)
            .field("centered_at", &self.centered_at)
            .finish_non_exhaustive()
    }
}

/// `v`'s int8 codes and scale: `v[i] ≈ codes[i] * scale` (scaled by the largest
/// component, which becomes ±127; all zeros and scale 0 for a zero or non-finite vector).
pub(super) fn quantize(v: &[f32]) -> (Vec<i8>, f32) {
    let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
    if max == 0.0 || !max.is_finite() {
        return (vec![0; v.len()], 0.0);
    }
    let scale = max / 127.0;
    let codes = v
        .iter()
        .map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8)
        .collect();
    (codes, scale)
}

/// Below this many items [`par_ranges`] stays on the calling thread.
const PARALLEL_FROM: usize = 8192;

/// `f(0..n)`, or `f` of parts of `0..n` in order, concatenated: split over the available
/// cores when `n` is large. A part whose thread cannot be started runs on the calling
/// thread.
fn par_ranges<T: Send>(n: usize, f: impl Fn(Range<usize>) -> Vec<T> + Sync) -> Vec<T> {
    static THREADS: OnceLock<usize> = OnceLock::new();
    let threads = *THREADS.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(1, usize::from)
            .min(8)
    });
    if n < PARALLEL_FROM || threads < 2 {
        return f(0..n);
    }
    let per = n.div_ceil(threads);
    let f = &f;
    let part = move |start: usize| f(start..(start + per).min(n));
    std::thread::scope(|s| {
        let parts: Vec<_> = (0..n)
            .step_by(per)
            .map(|start| {
                std::thread::Builder::new()
                    .spawn_scoped(s, move || part(start))
                    .map_err(|_| start)
            })
            .collect();
        let mut out = Vec::with_capacity(n);
        for p in parts {
            match p {
                Ok(handle) => out.extend(
                    handle
                        .join()
                        .unwrap_or_else(|e| std::panic::resume_unwind(e)),
                ),
                Err(start) => out.extend(part(start)),
            }
        }
        out
    })
}

/// The positions of the `keep` smallest of `dist` (ties: the lower position first), in
/// position order: the same set as the first `keep` of `(dist[i], i)` sorted, found by
/// counting (the distances are at most `max`) instead of sorting.
fn smallest_in_order(dist: &[u32], keep: usize, max: u32) -> Vec<usize> {
    if keep >= dist.len() {
        return (0..dist.len()).collect();
    }
    let mut count = vec![0usize; max as usize + 2];
    for &x in dist {
        count[(x.min(max + 1)) as usize] += 1;
    }
    // every distance under `cut` is kept, and the first `ties` at `cut`
    let (mut cut, mut below) = (0usize, 0usize);
    while below + count[cut] < keep {
        below += count[cut];
        cut += 1;
    }
    let (cut, mut ties) = (cut as u32, keep - below);
    let mut out = Vec::with_capacity(keep);
    for (i, &x) in dist.iter().enumerate() {
        let x = x.min(max + 1);
        if x < cut {
            out.push(i);
        } else if x == cut && ties > 0 {
            ties -= 1;
            out.push(i);
        }
    }
    out
}

impl VectorCache {
    /// An empty copy of a store at `version` (its `PRAGMA data_version`).
    pub fn new(dims: usize, version: i64) -> Self {
        Self::with_full_scan_up_to(dims, version, FULL_SCAN_UP_TO)
    }

    /// [`new`](Self::new) with another threshold for the bits (0: always), to measure
    /// how well the bits keep the nearest vectors on a set small enough to embed.
    pub fn with_full_scan_up_to(dims: usize, version: i64, full_scan_up_to: usize) -> Self {
        VectorCache {
            dims,
            full_scan_up_to,
            words: dims.div_ceil(64),
            version,
            ids: Vec::new(),
            pos: HashMap::new(),
            codes: huge::Codes::default(),
            scales: Vec::new(),
            sum: vec![0.0; dims],
            center: Vec::new(),
            centered_at: 0,
            bits: Vec::new(),
        }
    }

    /// The store's `PRAGMA data_version` this copy reflects.
    pub fn version(&self) -> i64 {
        self.version
    }

    /// How many vectors it holds.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether it holds no vector.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    fn signs(&self, v: impl Iterator<Item = f32>) -> Vec<u64> {
        let mut out = vec![0u64; self.words];
        for (i, (x, c)) in v.zip(&self.center).enumerate() {
            if x > *c {
                out[i / 64] |= 1 << (i % 64);
            }
        }
        out
    }

    /// Adds (or replaces) the vector of chunk `id`; `v` has `dims` components.
    pub fn insert(&mut self, id: i64, v: &[f32]) {
        let (codes, scale) = quantize(v);
        self.insert_codes(id, codes, scale);
    }

    /// Adds (or replaces) chunk `id`'s vector by its [`quantize`]d codes (`dims` long)
    /// and scale.
    pub fn insert_codes(&mut self, id: i64, codes: Vec<i8>, scale: f32) {
        debug_assert_eq!(codes.len(), self.dims);
        self.remove(id);
        for (s, c) in self.sum.iter_mut().zip(&codes) {
            *s += f64::from(*c) * f64::from(scale);
        }
        if !self.center.is_empty() {
            let bits = self.signs(codes.iter().map(|c| f32::from(*c) * scale));
            self.bits.extend(bits);
        }
        self.pos.insert(id, self.ids.len());
        self.ids.push(id);
        self.codes.extend_from_slice(&codes, huge::huge_wanted());
        self.scales.push(scale);
    }

    /// Removes the vector of chunk `id`, if there is one.
    pub fn remove(&mut self, id: i64) {
        let Some(i) = self.pos.remove(&id) else {
            return;
        };
        let (d, w) = (self.dims, self.words);
        let scale = self.scales[i];
        for (s, c) in self
            .sum
            .iter_mut()
            .zip(&self.codes.as_slice()[i * d..(i + 1) * d])
        {
            *s -= f64::from(*c) * f64::from(scale);
        }
        let last = self.ids.len() - 1;
        if i != last {
            self.codes.copy_within(last * d..(last + 1) * d, i * d);
            if !self.center.is_empty() {
                self.bits.copy_within(last * w..(last + 1) * w, i * w);
            }
            self.pos.insert(self.ids[last], i);
        }
        self.ids.swap_remove(i);
        self.scales.swap_remove(i);
        self.codes.truncate(last * d);
        if !self.center.is_empty() {
            self.bits.truncate(last * w);
        }
    }

    /// Takes the centre again (the mean of the vectors now) and recomputes every vector's
    /// bits: when bits are first needed and whenever the store has doubled since.
    fn recenter(&mut self) {
        let n = self.ids.len();
        self.center = self.sum.iter().map(|s| (s / n as f64) as f32).collect();
        self.centered_at = n;
        let d = self.dims;
        let mut bits = Vec::with_capacity(n * self.words);
        for i in 0..n {
            let scale = self.scales[i];
            let v = self.codes.as_slice()[i * d..(i + 1) * d]
                .iter()
                .map(|c| f32::from(*c) * scale);
            bits.extend(self.signs(v));
        }
        self.bits = bits;
    }

    /// The ids of the (about) `r` vectors nearest to `query` (unit length, `dims` long),
    /// best first, by the bits and then int8: candidates for exact re-scoring.
    pub fn candidates(&mut self, query: &[f32], r: usize) -> Vec<i64> {
        self.candidates_among(query, r, None)
    }

    /// [`candidates`](Self::candidates) among the vectors whose id `keep` accepts (a
    /// search within a period, say); `None`: among all.
    pub fn candidates_among(
        &mut self,
        query: &[f32],
        r: usize,
        keep: Option<&(dyn Fn(i64) -> bool + Sync)>,
    ) -> Vec<i64> {
        let n = self.ids.len();
        if n == 0 || r == 0 {
            return Vec::new();
        }
        self.codes.prefer(huge::huge_wanted());
        if let Some(keep) = keep {
            // Few enough after the filter (a period is usually narrow): int8 over them all.
            let pool: Vec<usize> = (0..n).filter(|&i| keep(self.ids[i])).collect();
            return self.rank_int8(query, r, pool);
        }
        let pool: Vec<usize> = if n > self.full_scan_up_to {
            if self.center.is_empty() || n > 2 * self.centered_at {
                self.recenter();
            }
            let q = self.signs(query.iter().copied());
            let w = self.words;
            let (bits, hamming) = (&self.bits, kernels::kernels().hamming);
            let dist: Vec<u32> = par_ranges(n, |range| {
                let mut out = vec![0; range.len()];
                hamming(&q, &bits[range.start * w..range.end * w], &mut out);
                out
            });
            let divisor = KEEP_DIVISOR.load(std::sync::atomic::Ordering::Relaxed);
            let keep = (n / divisor).max(self.full_scan_up_to).min(n);
            // in memory order: the int8 pass then reads the codes front to back
            smallest_in_order(&dist, keep, (w * 64) as u32)
        } else {
            (0..n).collect()
        };
        self.rank_int8(query, r, pool)
    }

    /// The ids of the `r` vectors of `pool` (positions) nearest to `query` by their int8
    /// codes, best first.
    fn rank_int8(&self, query: &[f32], r: usize, pool: Vec<usize>) -> Vec<i64> {
        let (mut q, _) = quantize(query);
        q.resize(self.dims, 0); // the kernel reads `q.len()` codes a vector
        let (codes, scales, dot) = (self.codes.as_slice(), &self.scales, kernels::kernels().dot);
        let mut scored: Vec<(f32, usize)> = par_ranges(pool.len(), |range| {
            let part = &pool[range];
            let mut dots = vec![0; part.len()];
            dot(&q, codes, part, &mut dots);
            dots.iter()
                .zip(part)
                .map(|(dot, &i)| (*dot as f32 * scales[i], i))
                .collect()
        });
        let by_score = |a: &(f32, usize), b: &(f32, usize)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
        if r < scored.len() {
            scored.select_nth_unstable_by(r, by_score);
            scored.truncate(r);
        }
        scored.sort_unstable_by(by_score);
        scored.into_iter().map(|(_, i)| self.ids[i]).collect()
    }
}

/// A deterministic pseudo-random unit vector of `dims` dimensions, for tests.
#[cfg(test)]
pub(super) fn random_unit(seed: u64, dims: usize) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut v: Vec<f32> = (0..dims)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        })
        .collect();
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter_mut().for_each(|x| *x /= n);
    v
}

#[cfg(test)]
mod tests {
    use super::random_unit as unit;
    use super::*;

    fn exact(vs: &[(i64, Vec<f32>)], q: &[f32], k: usize) -> Vec<i64> {
        let mut s: Vec<(f32, i64)> = vs
            .iter()
            .map(|(id, v)| (v.iter().zip(q).map(|(a, b)| a * b).sum(), *id))
            .collect();
        s.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        s.into_iter().take(k).map(|(_, id)| id).collect()
    }

    #[test]
    fn smallest_in_order_keeps_what_sorting_would() {
        let mut s = 12345u64;
        let dist: Vec<u32> = (0..5000)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s % 40) as u32 // many ties
            })
            .collect();
        for keep in [0, 1, 7, 100, 1250, 4999, 5000, 6000] {
            let mut sorted: Vec<(u32, usize)> = dist.iter().copied().zip(0..).collect();
            sorted.sort_unstable();
            let mut want: Vec<usize> = sorted.into_iter().take(keep).map(|(_, i)| i).collect();
            want.sort_unstable();
            assert_eq!(smallest_in_order(&dist, keep, 64), want, "{keep}");
        }
        assert_eq!(smallest_in_order(&[3, 1, 2, 1], 2, 4), vec![1, 3]);
    }

    #[test]
    fn quantize_round_trips_within_one_step() {
        let v = unit(7, 384);
        let (codes, scale) = quantize(&v);
        for (c, x) in codes.iter().zip(&v) {
            assert!((f32::from(*c) * scale - x).abs() <= scale / 2.0 + 1e-6);
        }
        assert_eq!(quantize(&[0.0, 0.0]), (vec![0, 0], 0.0));
    }

    #[test]
    fn a_small_store_finds_each_vector_itself_first() {
        let mut c = VectorCache::new(64, 0);
        for i in 0..500 {
            c.insert(i, &unit(i as u64, 64));
        }
        for i in [0, 1, 250, 499] {
            assert_eq!(c.candidates(&unit(i as u64, 64), 5)[0], i);
        }
    }

    #[test]
    fn a_big_store_keeps_the_exact_neighbours_among_its_candidates() {
        let dims = 64;
        let n = FULL_SCAN_UP_TO + 4000;
        // clustered like real embeddings: a shared direction plus noise
        let common = unit(1, dims);
        let vs: Vec<(i64, Vec<f32>)> = (0..n as i64)
            .map(|i| {
                let mut v: Vec<f32> = common
                    .iter()
                    .zip(unit(i as u64 + 100, dims))
                    .map(|(c, x)| 3.0 * c + x)
                    .collect();
                let l = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                v.iter_mut().for_each(|x| *x /= l);
                (i, v)
            })
            .collect();
        let mut c = VectorCache::new(dims, 0);
        for (id, v) in &vs {
            c.insert(*id, v);
        }
        let mut found = 0;
        for qi in 0..20 {
            let q = &vs[qi * 997 % n].1;
            let got: std::collections::HashSet<i64> = c.candidates(q, 40).into_iter().collect();
            found += exact(&vs, q, 10)
                .iter()
                .filter(|id| got.contains(id))
                .count();
        }
        assert!(
            found >= 198,
            "{found} of 200 exact neighbours among the candidates"
        );
    }

    #[test]
    fn remove_and_replace_keep_every_other_vector_findable() {
        let mut c = VectorCache::new(16, 0);
        for i in 0..100 {
            c.insert(i, &unit(i as u64, 16));
        }
        c.remove(0);
        c.remove(50);
        c.remove(12345); // not there: nothing happens
        c.insert(7, &unit(1000, 16)); // replaced
        assert_eq!(c.len(), 98);
        for i in (1..100).filter(|i| *i != 50 && *i != 7) {
            assert_eq!(c.candidates(&unit(i as u64, 16), 1), vec![i]);
        }
        assert_eq!(c.candidates(&unit(1000, 16), 1), vec![7]);
        assert!(!c.candidates(&unit(0, 16), 100).contains(&0));
    }

    #[test]
    fn a_filter_keeps_only_the_ids_it_accepts_nearest_first() {
        let mut c = VectorCache::with_full_scan_up_to(16, 0, 8);
        let vs: Vec<(i64, Vec<f32>)> = (0..40).map(|i| (i, random_unit(i as u64, 16))).collect();
        for (id, v) in &vs {
            c.insert(*id, v);
        }
        let even = |id: i64| id % 2 == 0;
        let got = c.candidates_among(&vs[6].1, 5, Some(&even));
        assert_eq!(got.len(), 5);
        assert_eq!(got[0], 6, "the query's own vector first");
        assert!(got.iter().all(|id| even(*id)), "{got:?}");
        let odd_one = |id: i64| id == 7;
        assert_eq!(c.candidates_among(&vs[6].1, 5, Some(&odd_one)), vec![7]);
    }

    #[test]
    fn codes_in_huge_pages_or_in_a_vec_give_the_same_candidates() {
        // 4,000 x 512 bytes: past the first mapping's half, so the codes are mapped
        let (dims, n) = (512, 4000);
        let mut c = VectorCache::with_full_scan_up_to(dims, 0, 1000);
        for i in 0..n {
            c.insert(i, &unit(i as u64, dims));
        }
        c.remove(17);
        for qi in [0u64, 5, 3999, 10_000] {
            let q = unit(qi, dims);
            use_huge_pages(true);
            let mapped = c.candidates(&q, 40);
            use_huge_pages(false);
            let plain = c.candidates(&q, 40);
            use_huge_pages(true);
            assert_eq!(mapped, plain, "query {qi}");
            assert_eq!(mapped.len(), 40);
        }
    }

    #[test]
    fn an_empty_store_has_no_candidates() {
        let mut c = VectorCache::new(8, 0);
        assert!(c.candidates(&unit(1, 8), 10).is_empty());
        c.insert(1, &unit(1, 8));
        assert!(c.candidates(&unit(1, 8), 0).is_empty());
    }
}
