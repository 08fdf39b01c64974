//! Fusion of hybrid search's text side and vector side.
//!
//! The default ([`Fusion::DEFAULT`], issue 30) is led by the vector side: each candidate
//! of either side (the best 100 of each, 50 before issue 49) is scored by its cosine to
//! the query plus 0.5 times its text evidence, the share of the query's words it holds
//! weighted by their IDF, so a word match lifts a chunk over one whose cosine is at most
//! 0.5 higher and a word found in most chunks lifts little. The depth is for the
//! vector side's sake: a turn whose cosine is only the 60th best but which holds the
//! question's words still reaches the ten (on the long conversations of issue 49, with
//! Klaw's text side wanting most of the query's words, it is often not found there).
//! When the vector side's best chunk is in another script than the query's (a question
//! answered across languages), the text side cannot judge: every chunk of the other
//! script gets the best evidence of the query's script, and between the languages the
//! cosine decides.
//!
//! 0.5 is the lift for the default model; a model whose cosines lie closer together
//! names a smaller one in its `klaw-model.json` (`hybrid_lift`: e5's is 0.1), which
//! [`Fusion::for_model`] puts in the default.
//!
//! Reciprocal Rank Fusion ([`rrf`], the fusion before) is kept for comparison: an item
//! at 1-based rank `r` on a side with weight `w` earns `w / (k + r)`, summed over the
//! sides that found it; ties go to the better (smaller) best rank, then the smaller id.
//! It sees ranks only, so a chunk found by both sides always outranks one found by one,
//! even the vector side's first: a question in one language found the same-topic note
//! in its own language by a common word over the answer in the other.

/// The RRF constant from Cormack et al. (2009); damps the weight of the top ranks.
pub(super) const RRF_K: f64 = 60.0;

/// Per-side weights of hybrid search: a chunk scores `vector × cosine + text × 0.5 ×
/// evidence` (with [`Fusion::Rrf`], `w / (60 + r)` at rank `r` on a side of weight `w`,
/// summed over the sides that found it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Weights {
    /// The full-text side.
    pub text: f64,
    /// The vector side.
    pub vector: f64,
}

impl Default for Weights {
    fn default() -> Self {
        Weights {
            text: 1.0,
            vector: 1.0,
        }
    }
}

/// Which side of a hybrid search found a result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, klaw_core::ToolSchema)]
#[serde(rename_all = "lowercase")]
pub enum FoundBy {
    /// Только полнотекстовый индекс (по словам)
    #[schema(description_en = "Only the full-text index (by words)")]
    Text,
    /// Только векторный индекс (по смыслу)
    #[schema(description_en = "Only the vector index (by meaning)")]
    Vector,
    /// Оба
    #[schema(description_en = "Both")]
    Both,
}

/// How hybrid search fuses its two sides. Not an API: the retrieval sets
/// (`tests/retrieval_sets.rs`) compare the candidates through
/// [`bench_support`](super::bench_support); `memory_search` uses [`Fusion::DEFAULT`]
/// with its model's lift ([`Fusion::for_model`]).
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fusion {
    /// Reciprocal Rank Fusion with k = 60 (the fusion before issue 30): a chunk found by
    /// both sides outranks one found by one side, whatever the scores.
    Rrf,
    /// Led by the vector side: every candidate of either side is scored by its cosine to
    /// the query, plus `lift` times its text evidence (0 to 1), so words can lift a chunk
    /// over one whose cosine is less than `lift` higher, never over a much stronger one.
    Lift {
        /// What the text evidence is.
        evidence: Evidence,
        /// The most the text evidence adds to a cosine.
        lift: f64,
        /// How many candidates each side proposes (at least the `k` asked for).
        depth: usize,
        /// How much of the evidence is the chunk's bm25 (divided by the best bm25 of the
        /// text side, 0 if it did not find the chunk): the evidence is multiplied by
        /// `1 - bm25 + bm25 × that`, so among chunks with the same words the one bm25
        /// ranks higher (more of them, a shorter text) gets more.
        bm25: f64,
        /// Whether the cosines are first stretched to 0..1 over the candidates (the
        /// best 1, the worst 0), so `lift` means the same for a model whose cosines
        /// are all close together (e5) as for one whose are spread out (USE).
        stretch: bool,
        /// If above 0: `lift` is scaled down by the spread of the vector side's cosines
        /// (best minus worst of its candidates) over this, when that is smaller (a
        /// model whose cosines lie close together gets a smaller lift).
        spread: f64,
        /// Whether the text side, when fewer than `depth` chunks hold more than half of
        /// the query's words, is topped up to `depth` by the any-word search (issue 49;
        /// see `store::text_side_for`).
        top_up: bool,
    },
}

/// The text evidence of [`Fusion::Lift`], from 0 to 1.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Evidence {
    /// bm25 of the text side divided by its best bm25 (0 for a chunk the text side did
    /// not find): the best word match always gets 1, however weak.
    Bm25,
    /// The share of the query's words the chunk contains, each weighted by its inverse
    /// document frequency in the index (bm25's IDF): a word in most chunks ("user",
    /// "пользователь") weighs little, a name or a code almost everything.
    Idf,
    /// [`Evidence::Idf`], but the text side does not vouch for or against a chunk in
    /// another script than the query's (Cyrillic or Latin, by most of the letters): such
    /// a chunk gets the best evidence of the query's script times the given factor.
    IdfNeutral(f64),
    /// [`Evidence::IdfNeutral`] only when the vector side's best chunk is in another
    /// script than the query's (the meaning points across languages, where words cannot
    /// judge); else [`Evidence::Idf`].
    IdfAcross(f64),
    /// [`Evidence::IdfAcross`], but a chunk in the other script gets the best evidence of
    /// the query's script (times the factor) in proportion to how near its cosine is to
    /// the vector side's best: times the square root of its cosine's place between the
    /// vector side's worst (0) and best (1), and at least its own evidence. The vector
    /// side vouches less for its 50th chunk than for its first; with the whole evidence
    /// a crowd of turns in the other language at a low cosine passed the answer in the
    /// query's (issue 49: a candidate, not the default; see `doc/memory.md`).
    IdfGraded(f64),
}

impl Fusion {
    /// The fusion `memory_search` uses.
    pub const DEFAULT: Fusion = Fusion::Lift {
        evidence: Evidence::IdfAcross(1.0),
        lift: 0.5,
        depth: 100,
        bm25: 0.0,
        stretch: false,
        spread: 0.0,
        top_up: true,
    };

    /// The default with the lift of a model (its `klaw-model.json`'s `hybrid_lift`, see
    /// [`EmbedderConfig::hybrid_lift`](super::EmbedderConfig::hybrid_lift)); `None`
    /// keeps the default's.
    pub fn for_model(lift: Option<f64>) -> Fusion {
        lift.map_or(Fusion::DEFAULT, |l| Fusion::DEFAULT.with_lift(l))
    }

    /// This fusion with `lift` (RRF has none: unchanged).
    pub fn with_lift(mut self, lift: f64) -> Fusion {
        if let Fusion::Lift { lift: l, .. } = &mut self {
            *l = lift;
        }
        self
    }

    /// This fusion with each side proposing `depth` candidates (RRF has none: unchanged).
    pub fn with_depth(mut self, depth: usize) -> Fusion {
        if let Fusion::Lift { depth: d, .. } = &mut self {
            *d = depth;
        }
        self
    }

    /// This fusion with the text side topped up by the any-word search or not (RRF never
    /// is: unchanged).
    pub fn with_top_up(mut self, top_up: bool) -> Fusion {
        if let Fusion::Lift { top_up: t, .. } = &mut self {
            *t = top_up;
        }
        self
    }

    /// This fusion with its text evidence `evidence` (RRF has none: unchanged).
    pub fn with_evidence(mut self, evidence: Evidence) -> Fusion {
        if let Fusion::Lift { evidence: e, .. } = &mut self {
            *e = evidence;
        }
        self
    }

    /// Whether the text side is topped up by the any-word search.
    pub(super) fn tops_up(self) -> bool {
        matches!(self, Fusion::Lift { top_up: true, .. })
    }

    /// How many candidates each side proposes for a search of `k`.
    pub fn depth(self, k: usize) -> usize {
        match self {
            Fusion::Rrf => k,
            Fusion::Lift { depth, .. } => depth.max(k),
        }
    }
}

/// How hybrid search adds up the scores of several vector spaces (`memory.model` listing
/// more than one model), each space's score being its own [`Fusion`] of its cosines with
/// the text evidence (its model's lift). Not an API, as [`Fusion`]: the default sums
/// them; the other fields are the ways measured against it (`make eval`, issue 30; see
/// `doc/memory.md`, "Two models"), none of which won.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spaces {
    /// The weight of every space after the first (the first weighs 1).
    pub others: f64,
    /// Their weight instead when the first space's best chunk is in another script than
    /// the query (its meaning points across languages).
    pub across: f64,
    /// Added to the cosine, in every space after the first, of a chunk in another script
    /// than the query: a model weaker across languages than in one (e5) scores a text
    /// and its translation lower than a text and its paraphrase.
    pub across_gap: f64,
    /// If above 0: in every space after the first, a candidate scores at least that
    /// space's best score less this much (the space may reorder the first space's near
    /// ties but not overturn a clear lead).
    pub cap: f64,
}

impl Spaces {
    /// Every space's score summed: how `memory_search` adds up the spaces.
    pub const DEFAULT: Spaces = Spaces {
        others: 1.0,
        across: 1.0,
        across_gap: 0.0,
        cap: 0.0,
    };

    /// The weight of space `n` (0 is the first); `across`: the first space's best chunk
    /// is in another script than the query.
    pub(super) fn weight(self, n: usize, across: bool) -> f64 {
        match (n, across) {
            (0, _) => 1.0,
            (_, true) => self.across,
            (_, false) => self.others,
        }
    }
}

/// One candidate of a [`Fusion::Lift`]: its id, cosine to the query, text evidence (0 to
/// 1) and the sides that found it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Candidate<T> {
    pub(super) id: T,
    pub(super) cosine: f64,
    pub(super) evidence: f64,
    pub(super) found_by: FoundBy,
}

/// Scores candidates as `weights.vector × cosine + weights.text × lift × evidence`, best
/// first (ties: the smaller id); with `stretch`, the cosines stretched to 0..1 over the
/// candidates first. Non-finite values count as 0.
pub(super) fn lift<T: Ord + Copy>(
    candidates: &[Candidate<T>],
    weights: Weights,
    lift: f64,
    stretch: bool,
    spread: f64,
) -> Vec<Fused<T>> {
    let finite = |x: f64| if x.is_finite() { x } else { 0.0 };
    let lift = if spread > 0.0 {
        let (lo, hi) = candidates
            .iter()
            .filter(|c| c.found_by != FoundBy::Text)
            .map(|c| finite(c.cosine))
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
                (lo.min(x), hi.max(x))
            });
        if hi > lo {
            lift * ((hi - lo) / spread).min(1.0)
        } else {
            lift
        }
    } else {
        lift
    };
    let (lo, hi) = candidates
        .iter()
        .map(|c| finite(c.cosine))
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
            (lo.min(x), hi.max(x))
        });
    let cosine = |c: f64| {
        let c = finite(c);
        if !stretch {
            c
        } else if hi > lo {
            (c - lo) / (hi - lo)
        } else {
            1.0
        }
    };
    let mut out: Vec<Fused<T>> = candidates
        .iter()
        .map(|c| Fused {
            id: c.id,
            score: finite(
                weights.vector * cosine(c.cosine)
                    + weights.text * lift * finite(c.evidence).clamp(0.0, 1.0),
            ),
            found_by: c.found_by,
        })
        .collect();
    out.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
    out
}

/// One fused result.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Fused<T> {
    /// The item's id.
    pub(super) id: T,
    /// The fused score.
    pub(super) score: f64,
    /// Which sides found it.
    pub(super) found_by: FoundBy,
}

/// Fuses two rankings (best first, ids unique within a side) with RRF constant `k`.
pub(super) fn rrf<T: Ord + Copy>(
    text: &[T],
    vector: &[T],
    weights: Weights,
    k: f64,
) -> Vec<Fused<T>> {
    // id -> (score, best rank, in text, in vector)
    let mut acc: std::collections::BTreeMap<T, (f64, usize, bool, bool)> =
        std::collections::BTreeMap::new();
    for (i, id) in text.iter().enumerate() {
        let e = acc.entry(*id).or_insert((0.0, usize::MAX, false, false));
        e.0 += weights.text / (k + (i + 1) as f64);
        e.1 = e.1.min(i + 1);
        e.2 = true;
    }
    for (i, id) in vector.iter().enumerate() {
        let e = acc.entry(*id).or_insert((0.0, usize::MAX, false, false));
        e.0 += weights.vector / (k + (i + 1) as f64);
        e.1 = e.1.min(i + 1);
        e.3 = true;
    }
    let mut out: Vec<(Fused<T>, usize)> = acc
        .into_iter()
        .map(|(id, (score, best, t, v))| {
            let found_by = match (t, v) {
                (true, true) => FoundBy::Both,
                (true, false) => FoundBy::Text,
                _ => FoundBy::Vector,
            };
            (
                Fused {
                    id,
                    score,
                    found_by,
                },
                best,
            )
        })
        .collect();
    out.sort_by(|(a, ar), (b, br)| {
        b.score
            .total_cmp(&a.score)
            .then(ar.cmp(br))
            .then(a.id.cmp(&b.id))
    });
    out.into_iter().map(|(f, _)| f).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn hand_computed_scores() {
        // text: 1, 2, 3; vector: 3, 4.
        let f = rrf(&[1, 2, 3], &[3, 4], Weights::default(), RRF_K);
        let ids: Vec<i32> = f.iter().map(|x| x.id).collect();
        // 3: 1/63 + 1/61 = 0.032266..; 1: 1/61 = 0.016393..; 4: 1/62; 2: 1/62.
        // 4 and 2 tie on score and best rank 2: the smaller id first.
        assert_eq!(ids, vec![3, 1, 2, 4]);
        assert!(close(f[0].score, 1.0 / 63.0 + 1.0 / 61.0));
        assert_eq!(f[0].found_by, FoundBy::Both);
        assert!(close(f[1].score, 1.0 / 61.0));
        assert_eq!(f[1].found_by, FoundBy::Text);
        assert!(close(f[2].score, 1.0 / 62.0));
        assert!(close(f[3].score, 1.0 / 62.0));
        assert_eq!(f[3].found_by, FoundBy::Vector);
    }

    #[test]
    fn weights_shift_the_order() {
        let w = Weights {
            text: 1.0,
            vector: 2.0,
        };
        let f = rrf(&[1], &[2], w, RRF_K);
        assert_eq!(f[0].id, 2);
        assert!(close(f[0].score, 2.0 / 61.0));
        assert!(close(f[1].score, 1.0 / 61.0));
    }

    #[test]
    fn equal_score_prefers_better_best_rank() {
        // a: rank 1 text (w 1) => 1/61. b: rank 2 on both with weights chosen to tie? Use k=0:
        // a at text rank 1: 1/1 = 1. b at text rank 2 + vector rank 2: 1/2 + 1/2 = 1.
        let f = rrf(&[10, 5], &[7, 5], Weights::default(), 0.0);
        // 10: 1, 7: 1, 5: 1; 10 and 7 have best rank 1, 5 has 2; then by id: 7, 10.
        let ids: Vec<i32> = f.iter().map(|x| x.id).collect();
        assert_eq!(ids, vec![7, 10, 5]);
    }

    fn cand(id: i32, cosine: f64, evidence: f64) -> Candidate<i32> {
        Candidate {
            id,
            cosine,
            evidence,
            found_by: FoundBy::Both,
        }
    }

    #[test]
    fn text_evidence_lifts_a_close_vector_hit_but_not_over_a_much_stronger_one() {
        // 1: the vector side's best, no words in common; 2: a bit weaker, every word;
        // 3: much weaker, every word.
        let c = [cand(1, 0.60, 0.0), cand(2, 0.55, 1.0), cand(3, 0.30, 1.0)];
        let f = lift(&c, Weights::default(), 0.1, false, 0.0);
        let ids: Vec<i32> = f.iter().map(|x| x.id).collect();
        assert_eq!(ids, vec![2, 1, 3]);
        assert!(close(f[0].score, 0.65));
        // a stronger vector hit stays first
        let f = lift(
            &[cand(1, 0.80, 0.0), cand(2, 0.55, 1.0)],
            Weights::default(),
            0.1,
            false,
            0.0,
        );
        assert_eq!(f[0].id, 1);
        // stretched: 1 → 1, 2 → 0.833.., 3 → 0
        let f = lift(&c, Weights::default(), 0.1, true, 0.0);
        assert!(close(f[0].score, 1.0) && f[0].id == 1);
        assert!(close(f[1].score, 0.25 / 0.3 + 0.1));
    }

    #[test]
    fn a_narrow_spread_of_cosines_gets_a_smaller_lift() {
        // vector candidates 0.80 and 0.70: spread 0.1, a third of 0.3
        let c = [
            Candidate {
                found_by: FoundBy::Vector,
                ..cand(1, 0.80, 0.0)
            },
            cand(2, 0.70, 1.0),
        ];
        let f = lift(&c, Weights::default(), 0.3, false, 0.3);
        assert_eq!(f[0].id, 1);
        assert!(close(f[1].score, 0.70 + 0.1));
        // a spread above the reference: the whole lift
        let f = lift(&c, Weights::default(), 0.3, false, 0.05);
        assert_eq!(f[0].id, 2);
        assert!(close(f[0].score, 1.0));
    }

    #[test]
    fn lift_survives_odd_numbers() {
        let c = [
            cand(1, f64::NAN, 1.0),
            cand(2, 0.5, f64::INFINITY),
            cand(3, -1.0, -3.0),
        ];
        for stretch in [false, true] {
            let f = lift(&c, Weights::default(), 0.1, stretch, 0.0);
            assert_eq!(f.len(), 3);
            assert!(f.iter().all(|x| x.score.is_finite()));
            assert!(lift::<i32>(&[], Weights::default(), 0.1, stretch, 0.3).is_empty());
        }
        // one candidate, or all equal: stretched to 1
        let f = lift(&[cand(1, 0.3, 0.0)], Weights::default(), 0.1, true, 0.0);
        assert!(close(f[0].score, 1.0));
    }

    #[test]
    fn a_model_s_lift_replaces_the_default_s_and_nothing_else() {
        assert_eq!(Fusion::for_model(None), Fusion::DEFAULT);
        let (Fusion::Lift { lift, depth, .. }, Fusion::Lift { depth: d0, .. }) =
            (Fusion::for_model(Some(0.15)), Fusion::DEFAULT)
        else {
            panic!("the default is a lift");
        };
        assert!(close(lift, 0.15));
        assert_eq!(depth, d0);
        assert_eq!(Fusion::Rrf.with_lift(0.2), Fusion::Rrf);
    }

    #[test]
    fn empty_sides() {
        assert!(rrf::<i64>(&[], &[], Weights::default(), RRF_K).is_empty());
        let f = rrf(&[], &[9], Weights::default(), RRF_K);
        assert_eq!(f[0].found_by, FoundBy::Vector);
    }
}
