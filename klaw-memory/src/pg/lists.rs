//! The text side's impact lists (issue 45): for each word held by more than
//! [`THRESHOLD`] chunks, its best [`SIZE`] chunks by BM25's term part, and a bound on
//! that part for every chunk not in the list, so that a search with common words is
//! proven from the lists without ranking every chunk that has them.
//!
//! BM25's term part of a lexeme in a chunk is `tf·(k1 + 1) / (tf + k1·(1 − b + b·ntok /
//! avgdl))` (a chunk's score is the sum over the query's phrases of the phrase's weight
//! times it). A list is made at the `avgdl` of its making, `avgdl0`: its chunks are the
//! best [`SIZE`] by the part at `avgdl0`, and `theta` is the best part at `avgdl0` of
//! any chunk with the word that is not in it. At another `avgdl` a part grows by at most
//! `max(1, avgdl / avgdl0)` (with `A = tf + k1·(1 − b)` and `x = k1·b·ntok`, the ratio is
//! `(A + x / avgdl0) / (A + x / avgdl)`, at most `avgdl / avgdl0` when that is over 1
//! and at most 1 otherwise), and never reaches `k1 + 1`: so `min(theta·max(1, avgdl /
//! avgdl0), k1 + 1)` bounds it for every chunk out of the list, whenever it is read.
//!
//! Kept by every engine: a chunk saved with a listed word whose part (at the list's
//! `avgdl0`) is above `theta` joins the list (`theta` stays the bound of the rest); a
//! chunk removed leaves its lists (the rest is smaller: `theta` stays a bound). A list is
//! made lazily, by the first search that has the word once it is held by more than
//! [`THRESHOLD`] chunks (ranking its chunks once: what every search with it did before),
//! under the lock of the word's row in `klaw_memory_terms`, which every save of a chunk
//! with the word also takes before it looks for the word's list: a save either ends
//! before the list reads the chunks (and is in what it reads) or finds the list made.
//! A list is never shortened: saves above `theta` make it longer.
//!
//! A search ([`search`]) takes as candidates the chunks of the lists of its listed
//! phrases and every chunk with one of its other phrases (their postings, few: each held
//! by [`THRESHOLD`] chunks at most). A chunk that is no candidate has no unlisted phrase
//! and is in none of the lists, so it scores at most `Σ w·min(theta·max(1, avgdl /
//! avgdl0), k1 + 1)` over the listed phrases. The candidates are scored exactly (from
//! their rows, by the same SQL as every ranking), the likeliest first (by a bound of
//! each: its exact part in each list it is in, `theta`'s bound for the others, its
//! unlisted phrases' bounds), until the `k`-th best scored beats both that bound and the
//! next candidate's: the answer is then the one ranking every match gives. When it cannot
//! (several common words whose `theta`s add up to more than the best chunks score, a
//! period that keeps few of the lists' chunks, fewer than `k` matches), the search falls
//! back to ranking the postings (MaxScore, as before the lists). A query whose matches
//! need several of its terms (hybrid's text side of two words or more) does not try.

use super::{B, K1, TextQuery, quote_lexeme};
use crate::store::StoreError;
use std::collections::HashMap;

/// A word held by more than this many chunks gets a list (made by the first search with
/// it): below it, ranking its postings costs a few milliseconds at most.
pub(super) const THRESHOLD: i64 = 4000;

/// The chunks a list holds when made: enough that a search's 100th best (hybrid's text
/// side asks for 100) is well above the list's bound.
pub(super) const SIZE: usize = 1000;

/// The tables of the lists, made (if missing) with the memory's other tables.
pub(super) const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS klaw_memory_lists (
        lexeme TEXT PRIMARY KEY,
        avgdl0 FLOAT8 NOT NULL,
        theta FLOAT8 NOT NULL,
        ndoc BIGINT NOT NULL);
    CREATE TABLE IF NOT EXISTS klaw_memory_impacts (
        lexeme TEXT NOT NULL,
        id BIGINT NOT NULL,
        tf INTEGER NOT NULL,
        ntok INTEGER NOT NULL,
        PRIMARY KEY (lexeme, id));
    CREATE INDEX IF NOT EXISTS klaw_memory_impacts_id ON klaw_memory_impacts (id);";

/// When words get lists, and how long: [`THRESHOLD`] and [`SIZE`] unless a test or a
/// bench sets others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListSettings {
    /// A word held by more than this many chunks gets a list.
    pub threshold: i64,
    /// The chunks a list holds when made.
    pub size: usize,
}

impl Default for ListSettings {
    fn default() -> Self {
        Self {
            threshold: THRESHOLD,
            size: SIZE,
        }
    }
}

/// BM25's term part of a lexeme `tf` times in a chunk of `ntok` tokens at `avgdl`.
pub(super) fn part(tf: i32, ntok: i32, avgdl: f64) -> f64 {
    let tf = f64::from(tf);
    tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * f64::from(ntok) / avgdl))
}

/// The most the part of a chunk out of a list can be at `avgdl`, when at the list's
/// `avgdl0` it was at most `theta` (see the module docs): with `K = k1 + 1` and
/// `s = 1/part − 1/K` (which is `(k1·(1 − b) + k1·b·ntok / avgdl) / (tf·K)`), `s` at
/// `avgdl` is at least `min(1, avgdl0 / avgdl)` times `s` at `avgdl0`, which is at least
/// `1/theta − 1/K`. Tighter than `theta·max(1, avgdl / avgdl0)` (which it never
/// exceeds), because BM25's term saturates: at a `theta` of 2.0 and `avgdl` 1.4 times
/// `avgdl0`, 2.05 against 2.8 (itself above the `K` = 2.2 no part reaches).
pub(super) fn rest_bound(theta: f64, avgdl0: f64, avgdl: f64) -> f64 {
    let k = K1 + 1.0;
    if theta <= 0.0 {
        return 0.0;
    }
    if theta >= k {
        return k;
    }
    let shrink = if avgdl > 0.0 {
        (avgdl0 / avgdl).min(1.0)
    } else {
        1.0
    };
    1.0 / (1.0 / k + shrink * (1.0 / theta - 1.0 / k))
}

/// A chunk an insert stored: its id, its tokens, its lexemes with their frequency.
pub(super) type Stored<'a> = (i64, i32, &'a [(String, i32)]);

/// Adds the chunks an insert stored to the lists of their words, when their part is
/// above the list's `theta`: `(id, ntok, lexemes with their frequency)` each. Runs after
/// the words' counts are added in the same transaction (which holds their rows' locks).
pub(super) async fn keep_on_insert(
    tx: &deadpool_postgres::Transaction<'_>,
    lexemes: &[&str],
    stored: &[Stored<'_>],
) -> Result<(), StoreError> {
    let st = tx
        .prepare_cached(
            "SELECT lexeme, avgdl0, theta FROM klaw_memory_lists WHERE lexeme = ANY($1)",
        )
        .await?;
    let lists: HashMap<String, (f64, f64)> = tx
        .query(&st, &[&lexemes])
        .await?
        .iter()
        .map(|r| (r.get(0), (r.get(1), r.get(2))))
        .collect();
    if lists.is_empty() {
        return Ok(());
    }
    let (mut lex, mut ids, mut tfs, mut ntoks) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (id, ntok, words) in stored {
        for (l, tf) in words.iter() {
            if let Some(&(avgdl0, theta)) = lists.get(l)
                && part(*tf, *ntok, avgdl0) > theta
            {
                lex.push(l.as_str());
                ids.push(*id);
                tfs.push(*tf);
                ntoks.push(*ntok);
            }
        }
    }
    if !ids.is_empty() {
        tx.execute(
            "INSERT INTO klaw_memory_impacts (lexeme, id, tf, ntok)
             SELECT * FROM unnest($1::text[], $2::int8[], $3::int4[], $4::int4[])
             ON CONFLICT DO NOTHING",
            &[&lex, &ids, &tfs, &ntoks],
        )
        .await?;
    }
    Ok(())
}

/// Makes `lexeme`'s list if it is held by more than `settings.threshold` chunks and has
/// none: its best `settings.size` chunks by the part at today's `avgdl`, and the best
/// part of the others as its `theta`. One transaction, under the lock of the word's row
/// in `klaw_memory_terms` (see the module docs); another engine making it at the same
/// time waits and then finds it made.
async fn make(
    c: &mut deadpool_postgres::Object,
    lexeme: &str,
    settings: ListSettings,
) -> Result<(), StoreError> {
    let tx = c.transaction().await?;
    let Some(ndoc) = tx
        .query_opt(
            "SELECT ndoc FROM klaw_memory_terms WHERE lexeme = $1 FOR UPDATE",
            &[&lexeme],
        )
        .await?
        .map(|r| r.get::<_, i64>(0))
    else {
        return Ok(());
    };
    let made = tx
        .query_opt(
            "SELECT 1 FROM klaw_memory_lists WHERE lexeme = $1",
            &[&lexeme],
        )
        .await?
        .is_some();
    if made || ndoc <= settings.threshold {
        return Ok(());
    }
    let r = tx
        .query_one("SELECT chunks, tokens FROM klaw_memory_stats", &[])
        .await?;
    let (n, tokens): (i64, i64) = (r.get(0), r.get(1));
    let avgdl0 = if n > 0 { tokens as f64 / n as f64 } else { 1.0 };
    let best = tx
        .query(
            "SELECT m.id, u.tf, m.ntok FROM klaw_memory_chunks m,
                 LATERAL (SELECT cardinality(x.positions) AS tf
                          FROM unnest(ts_filter(setweight(m.tsv, 'A', ARRAY[$1::text]), '{a}')) x
                 ) u
             WHERE m.tsv @@ $2::text::tsquery",
            &[&lexeme, &quote_lexeme(lexeme)],
        )
        .await?;
    // ranked here, by the same part as the saves compare with theta
    let mut ranked: Vec<(f64, i64, i32, i32)> = best
        .iter()
        .map(|r| {
            let (id, tf, ntok): (i64, i32, i32) = (r.get(0), r.get(1), r.get(2));
            (part(tf, ntok, avgdl0), id, tf, ntok)
        })
        .collect();
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let theta = ranked.get(settings.size).map_or(0.0, |r| r.0);
    ranked.truncate(settings.size);
    tx.execute(
        "INSERT INTO klaw_memory_lists (lexeme, avgdl0, theta, ndoc) VALUES ($1, $2, $3, $4)",
        &[&lexeme, &avgdl0, &theta, &(best.len() as i64)],
    )
    .await?;
    let ids: Vec<i64> = ranked.iter().map(|r| r.1).collect();
    let tfs: Vec<i32> = ranked.iter().map(|r| r.2).collect();
    let ntoks: Vec<i32> = ranked.iter().map(|r| r.3).collect();
    tx.execute(
        "INSERT INTO klaw_memory_impacts (lexeme, id, tf, ntok)
         SELECT $1, * FROM unnest($2::int8[], $3::int4[], $4::int4[])",
        &[&lexeme, &ids, &tfs, &ntoks],
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

/// A list as a search reads it.
struct List {
    avgdl0: f64,
    theta: f64,
    /// `(id, tf, ntok)` of each chunk in it.
    chunks: Vec<(i64, i32, i32)>,
}

/// The lists of `lexemes` that are made.
async fn read(
    c: &deadpool_postgres::Object,
    lexemes: &[String],
) -> Result<HashMap<String, List>, StoreError> {
    let heads = c
        .prepare_cached(
            "SELECT lexeme, avgdl0, theta FROM klaw_memory_lists WHERE lexeme = ANY($1)",
        )
        .await?;
    let mut lists: HashMap<String, List> = c
        .query(&heads, &[&lexemes])
        .await?
        .iter()
        .map(|r| {
            (
                r.get(0),
                List {
                    avgdl0: r.get(1),
                    theta: r.get(2),
                    chunks: Vec::new(),
                },
            )
        })
        .collect();
    if lists.is_empty() {
        return Ok(lists);
    }
    let made: Vec<&str> = lists.keys().map(String::as_str).collect();
    let st = c
        .prepare_cached(
            "SELECT lexeme, id, tf, ntok FROM klaw_memory_impacts WHERE lexeme = ANY($1)",
        )
        .await?;
    for r in c.query(&st, &[&made]).await? {
        let l: &str = r.get(0);
        if let Some(list) = lists.get_mut(l) {
            list.chunks.push((r.get(1), r.get(2), r.get(3)));
        }
    }
    Ok(lists)
}

/// What [`search`] needs of the ranking it proves.
pub(super) struct Ranking<'a> {
    /// The query.
    pub q: &'a TextQuery,
    /// The best `k` are asked for.
    pub k: usize,
    /// The query's phrases (lexemes), their weights (IDF times count), the most each can
    /// add to a chunk's score, and how many chunks hold each.
    pub lexemes: &'a [String],
    pub weights: &'a [f64],
    pub bounds: &'a [f64],
    pub ndocs: &'a [i64],
    /// Today's average chunk length in tokens.
    pub avgdl: f64,
    /// The ranking SQL restricted to the chunks whose ids are `$1` (its other parameters
    /// as the postings' ranking has them).
    pub sql: &'a str,
    /// The period's bounds.
    pub from: i64,
    pub to: i64,
}

/// A relative and an absolute margin for the sums' rounding (the scores in SQL, the
/// bounds here).
fn above(score: f64, bound: f64) -> bool {
    score > bound * (1.0 + 1e-9) + 1e-12
}

/// The best `k` of the ranking proven from the lists, best first (ties by id) as the
/// ranking SQL's rows; `None` when the query has no phrase held by more than the
/// threshold, or the lists cannot prove it (then the caller ranks the postings).
pub(super) async fn search(
    c: &mut deadpool_postgres::Object,
    r: &Ranking<'_>,
    settings: ListSettings,
) -> Result<Option<Vec<tokio_postgres::Row>>, StoreError> {
    let listed: Vec<usize> = (0..r.lexemes.len())
        .filter(|&i| r.ndocs[i] > settings.threshold)
        .collect();
    // a query whose matches need several of its terms (hybrid's "more than half of the
    // words" with two or more) is seldom proven: its candidates from one word's list
    // mostly lack its other words, so the k-th scores below the other words' bounds (2 of
    // 78 such searches at a million chunks, 6 of 117 at 100,000), and trying cost more
    // than it saved (hybrid p50 1.66 times as long at 100,000): ranked as before
    if listed.is_empty() || r.k == 0 || r.q.need > 1 {
        return Ok(None);
    }
    let wanted: Vec<String> = listed.iter().map(|&i| r.lexemes[i].clone()).collect();
    let mut lists = read(c, &wanted).await?;
    if lists.len() < wanted.len() {
        for l in wanted.iter().filter(|l| !lists.contains_key(*l)) {
            // a list another engine is making, or a conflict: the postings this time
            if make(c, l, settings).await.is_err() {
                return Ok(None);
            }
        }
        lists = read(c, &wanted).await?;
        if lists.len() < wanted.len() {
            return Ok(None);
        }
    }
    // what a chunk in none of the lists can add by each listed phrase (theta's bound)
    let rests: Vec<f64> = listed
        .iter()
        .map(|&i| {
            let list = &lists[&r.lexemes[i]];
            rest_bound(list.theta, list.avgdl0, r.avgdl) * r.weights[i]
        })
        .collect();
    // a chunk that is no candidate scores at most this
    let out_bound: f64 = rests.iter().sum();
    // the chunks with an unlisted phrase (few each), and what those phrases can add
    let mut holds: HashMap<i64, f64> = HashMap::new();
    let unlisted: Vec<usize> = (0..r.lexemes.len())
        .filter(|&i| r.ndocs[i] > 0 && r.ndocs[i] <= settings.threshold)
        .collect();
    if !unlisted.is_empty() {
        let st = c
            .prepare_cached("SELECT id FROM klaw_memory_chunks WHERE tsv @@ $1::text::tsquery")
            .await?;
        for &i in &unlisted {
            for row in c.query(&st, &[&quote_lexeme(&r.lexemes[i])]).await? {
                *holds.entry(row.get(0)).or_insert(0.0) += r.bounds[i];
            }
        }
    }
    // each candidate's bound: its unlisted phrases' bounds, its exact part in each list it
    // is in, theta's bound in the others
    let mut ub: HashMap<i64, f64> = holds;
    let rest_all = out_bound;
    for (j, &i) in listed.iter().enumerate() {
        for &(id, tf, ntok) in &lists[&r.lexemes[i]].chunks {
            *ub.entry(id).or_insert(0.0) += r.weights[i] * part(tf, ntok, r.avgdl) - rests[j];
        }
    }
    let mut order: Vec<(f64, i64)> = ub.into_iter().map(|(id, u)| (u + rest_all, id)).collect();
    if order.len() < r.k {
        return Ok(None);
    }
    order.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    // the k-th best can score no more than the k-th best bound: nothing to prove with
    if !above(order[r.k - 1].0, out_bound) {
        return Ok(None);
    }
    let mut best: Vec<tokio_postgres::Row> = Vec::new();
    let mut at = 0;
    let mut batch = (2 * r.k).max(50);
    loop {
        let ids: Vec<i64> = order[at..(at + batch).min(order.len())]
            .iter()
            .map(|x| x.1)
            .collect();
        at += ids.len();
        batch *= 2;
        let rows = c
            .query(
                r.sql,
                &[
                    &ids,
                    &r.lexemes,
                    &r.weights,
                    &r.avgdl,
                    &(ids.len() as i64),
                    &r.from,
                    &r.to,
                    &r.q.tsquery,
                ],
            )
            .await?;
        best.extend(rows);
        best.sort_by(|a, b| {
            b.get::<_, f64>(4)
                .total_cmp(&a.get::<_, f64>(4))
                .then(a.get::<_, i64>(0).cmp(&b.get::<_, i64>(0)))
        });
        best.truncate(r.k);
        // the best candidate not scored yet can score no more than its bound
        let next = order.get(at).map(|x| x.0);
        if let Some(kth) = best.get(r.k - 1).map(|row| row.get::<_, f64>(4))
            && above(kth, out_bound.max(next.unwrap_or(0.0)))
        {
            return Ok(Some(best));
        }
        match next {
            // every candidate scored, and the k-th is not above the rest's bound
            None => return Ok(None),
            // the candidates left cannot lift the k-th above the rest's bound
            Some(n) if !above(n, out_bound) => return Ok(None),
            Some(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_of_the_rest_holds_as_avgdl_moves() {
        // every (tf, ntok) whose part at avgdl0 is at most theta has its part at avgdl
        // at most the bound, which is at most theta·max(1, avgdl / avgdl0)
        for avgdl0 in [5.0, 35.0, 120.0] {
            for theta in [0.3, 1.0, 1.9, 2.1] {
                for avgdl in [2.0, 20.0, 35.0, 70.0, 400.0] {
                    let bound = rest_bound(theta, avgdl0, avgdl);
                    let loose = theta * (avgdl / avgdl0).max(1.0);
                    assert!(bound <= loose * (1.0 + 1e-12), "{theta} {avgdl0} {avgdl}");
                    for tf in 1..60 {
                        for ntok in (1..400).step_by(3) {
                            if part(tf, ntok, avgdl0) <= theta {
                                let p = part(tf, ntok, avgdl);
                                assert!(p <= bound * (1.0 + 1e-12), "{tf} {ntok} {p} {bound}");
                            }
                        }
                    }
                }
            }
        }
    }
}
