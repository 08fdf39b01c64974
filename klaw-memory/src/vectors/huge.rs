//! The int8 codes' bytes, in anonymous memory advised for transparent huge pages.
//!
//! The int8 pass reads a quarter of the codes at scattered positions (128 MB a query at
//! a million vectors of 512 dimensions, from a 512 MB array): with 4 KB pages nearly
//! every vector read is a page walk the TLB cannot hold (512 MB is 131,072 pages; a
//! core's second-level TLB holds a few thousand). With 2 MB pages it is 256. So the codes
//! live in an anonymous mapping (`memmap2`) advised `MADV_HUGEPAGE` before it is first
//! touched: the kernel backs it with huge pages when transparent huge pages are `always`
//! or `madvise` (`/sys/kernel/mm/transparent_hugepage/enabled`). Where they are off, not
//! on Linux, or the mapping cannot be made, the codes are the same bytes in a plain
//! `Vec`: the same results, 4 KB pages.

use std::sync::atomic::{AtomicBool, Ordering};

use memmap2::MmapMut;

/// Whether new code arrays ask for huge pages (the default) or stay in a plain `Vec`.
static USE_HUGE: AtomicBool = AtomicBool::new(true);

/// Makes the code arrays ask for huge pages (`true`, the default) or not: to measure
/// the difference in one process (the benches). An existing array moves at its next
/// search ([`Codes::prefer`]).
pub(crate) fn use_huge_pages(yes: bool) {
    USE_HUGE.store(yes, Ordering::Relaxed);
}

/// Whether [`use_huge_pages`] asks for huge pages.
pub(super) fn huge_wanted() -> bool {
    USE_HUGE.load(Ordering::Relaxed)
}

/// The smallest mapping: one huge page (2 MB on x86-64 and aarch64 with 4 KB pages).
const MIN_MAPPED: usize = 2 << 20;

enum Buf {
    /// `len` bytes of a mapping of `capacity` (the mapping's length).
    Mapped(MmapMut),
    /// Exactly the bytes.
    Plain(Vec<u8>),
}

/// A growable array of int8 codes: see the module docs.
pub(super) struct Codes {
    buf: Buf,
    len: usize,
}

impl Default for Codes {
    fn default() -> Self {
        Codes {
            buf: Buf::Plain(Vec::new()),
            len: 0,
        }
    }
}

/// An anonymous mapping of `len` bytes advised for huge pages, or `None` if it cannot be
/// made. The advice is best effort: a kernel without transparent huge pages refuses it
/// and the mapping stays in 4 KB pages.
fn huge_map(len: usize) -> Option<MmapMut> {
    let map = match MmapMut::map_anon(len) {
        Ok(map) => map,
        Err(e) => {
            tracing::debug!(error = %e, len, "no anonymous mapping for the vector codes");
            return None;
        }
    };
    #[cfg(target_os = "linux")]
    if let Err(e) = map.advise(memmap2::Advice::HugePage) {
        tracing::debug!(error = %e, "MADV_HUGEPAGE refused for the vector codes");
    }
    Some(map)
}

impl Codes {
    /// The codes.
    pub(super) fn as_slice(&self) -> &[i8] {
        let bytes = match &self.buf {
            Buf::Mapped(m) => &m[..self.len],
            Buf::Plain(v) => &v[..],
        };
        bytemuck::must_cast_slice(bytes)
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        match &mut self.buf {
            Buf::Mapped(m) => &mut m[..self.len],
            Buf::Plain(v) => &mut v[..],
        }
    }

    /// Whether the codes are in a mapping advised for huge pages.
    #[cfg(test)]
    pub(super) fn is_mapped(&self) -> bool {
        matches!(self.buf, Buf::Mapped(_))
    }

    /// Moves the codes into a mapping (`huge`, if there are more than fit in half a
    /// huge page and a mapping can be made) or into a plain `Vec` (`!huge`), if they
    /// are not there yet.
    pub(super) fn prefer(&mut self, huge: bool) {
        match (&self.buf, huge) {
            (Buf::Plain(v), true) if v.len() > MIN_MAPPED / 2 => {
                if let Some(mut map) = huge_map(v.len().max(MIN_MAPPED)) {
                    map[..v.len()].copy_from_slice(v);
                    self.buf = Buf::Mapped(map);
                }
            }
            (Buf::Mapped(m), false) => self.buf = Buf::Plain(m[..self.len].to_vec()),
            _ => {}
        }
    }

    /// Room for `more` codes beyond `len`; a new mapping (twice as big, at least
    /// [`MIN_MAPPED`]) when `huge` and the current one is full.
    fn reserve(&mut self, more: usize, huge: bool) {
        let needed = self.len.saturating_add(more);
        match &mut self.buf {
            Buf::Mapped(m) if needed <= m.len() => {}
            Buf::Plain(v) if !huge || needed <= MIN_MAPPED / 2 => v.reserve(more),
            _ => {
                let capacity = match &self.buf {
                    Buf::Mapped(m) => m.len(),
                    Buf::Plain(v) => v.capacity(),
                };
                let grown = needed.max(capacity.saturating_mul(2)).max(MIN_MAPPED);
                match huge_map(grown) {
                    Some(mut map) => {
                        map[..self.len].copy_from_slice(&self.bytes_mut()[..]);
                        self.buf = Buf::Mapped(map);
                    }
                    None => {
                        // no mapping: the same bytes in a Vec
                        let mut v = Vec::with_capacity(needed);
                        v.extend_from_slice(self.bytes_mut());
                        self.buf = Buf::Plain(v);
                    }
                }
            }
        }
    }

    /// Appends `codes` (into a mapping once there are enough of them, if `huge`).
    pub(super) fn extend_from_slice(&mut self, codes: &[i8], huge: bool) {
        self.reserve(codes.len(), huge);
        let bytes: &[u8] = bytemuck::must_cast_slice(codes);
        match &mut self.buf {
            Buf::Mapped(m) => m[self.len..self.len + bytes.len()].copy_from_slice(bytes),
            Buf::Plain(v) => v.extend_from_slice(bytes),
        }
        self.len += bytes.len();
    }

    /// Copies the codes of `src` to `dest` (a position), as `slice::copy_within`.
    pub(super) fn copy_within(&mut self, src: std::ops::Range<usize>, dest: usize) {
        self.bytes_mut().copy_within(src, dest);
    }

    /// Keeps the first `len` codes (the mapping keeps its size).
    pub(super) fn truncate(&mut self, len: usize) {
        if len < self.len {
            self.len = len;
            if let Buf::Plain(v) = &mut self.buf {
                v.truncate(len);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(n: usize) -> Vec<i8> {
        (0..n).map(|i| (i * 7 % 256) as u8 as i8).collect()
    }

    #[test]
    fn both_kinds_hold_the_same_codes_through_growth_and_moves() {
        for huge in [false, true] {
            let mut c = Codes::default();
            let mut want = Vec::new();
            // past the first mapping (2 MB) and its doubling
            for part in 0..100 {
                let p = pattern(50_000 + part);
                c.extend_from_slice(&p, huge);
                want.extend_from_slice(&p);
            }
            assert_eq!(c.as_slice(), &want[..], "huge {huge}");
            c.copy_within(100..200, 0);
            want.copy_within(100..200, 0);
            c.truncate(1_000_000);
            want.truncate(1_000_000);
            assert_eq!(c.as_slice(), &want[..]);
            c.prefer(!huge);
            assert_eq!(c.as_slice(), &want[..]);
            c.prefer(huge);
            assert_eq!(c.as_slice(), &want[..]);
            c.extend_from_slice(&[-128, 127], huge);
            want.extend_from_slice(&[-128, 127]);
            assert_eq!(c.as_slice(), &want[..]);
        }
    }

    #[test]
    fn few_codes_stay_in_a_vec_many_go_to_a_mapping() {
        let mut c = Codes::default();
        c.extend_from_slice(&pattern(1000), true);
        assert!(!c.is_mapped(), "1,000 bytes do not take a 2 MB mapping");
        c.extend_from_slice(&pattern(MIN_MAPPED), true);
        // a mapping, unless this machine cannot make one
        assert_eq!(c.is_mapped(), MmapMut::map_anon(1).is_ok());
        assert_eq!(c.as_slice().len(), 1000 + MIN_MAPPED);
    }
}
