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
//! never shortened: saves above `theta` make it longer.
//!
//! A list is asked for by the first search that has the word once it is held by more
//! than [`THRESHOLD`] chunks, and built in the background ([`Builds`]: one task of the
//! store, one word at a time) while that search, and every other until the list is
//! installed, ranks the postings: a search never waits for a list. [`build`] holds the
//! word's advisory lock (`pg_try_advisory_lock`: a second engine, or store, asking for
//! the same word gives up at once) and holds the lock of the word's row in
//! `klaw_memory_terms`, which every save and removal of a chunk with the word also takes,
//! only twice and briefly: to write a mark in `klaw_memory_list_builds` (from then on,
//! each save of a chunk with the word puts it in `klaw_memory_impacts` whatever its part:
//! `theta` is not known yet), and to install the list. In between, one statement (a
//! snapshot taken after the mark's commit: it has every chunk saved before the mark)
//! selects the best `size + 1` chunks by the part (`size` is [`SIZE`] by default), in
//! SQL. The install takes `theta` from the last of them, adds the best `size` to what the
//! saves put meanwhile (dropping those of them not above `theta`), leaves out the chunks
//! removed meanwhile, and writes the list's head, in one transaction: every chunk with
//! the word is then in the list or has a part of at most `theta`, as if the list had
//! been made at once. A failed build is logged and tried again later (5 s, then twice
//! as long each time). A build that dies leaves its mark (the saves go on putting their
//! chunks aside, harmlessly) until the next build of the word, which takes over (its
//! advisory lock was the dead connection's).
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
    CREATE INDEX IF NOT EXISTS klaw_memory_impacts_id ON klaw_memory_impacts (id);
    CREATE TABLE IF NOT EXISTS klaw_memory_list_builds (
        lexeme TEXT PRIMARY KEY,
        since TIMESTAMPTZ NOT NULL DEFAULT now());";

/// When words get lists, and how long: [`THRESHOLD`] and [`SIZE`] unless a test or a
/// bench sets others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListSettings {
    /// A word held by more than this many chunks gets a list.
    pub threshold: i64,
    /// The chunks a list holds when made.
    pub size: usize,
    /// A pause of each build between its snapshot of the chunks and its install (none;
    /// a test sets one to save and search while a list is being built).
    pub pause: std::time::Duration,
}

impl Default for ListSettings {
    fn default() -> Self {
        Self {
            threshold: THRESHOLD,
            size: SIZE,
            pause: std::time::Duration::ZERO,
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
/// above the list's `theta`, and to the lists being built whatever their part (the
/// build's install sorts them): `(id, ntok, lexemes with their frequency)` each. Runs
/// after the words' counts are added in the same transaction (which holds their rows'
/// locks).
pub(super) async fn keep_on_insert(
    tx: &deadpool_postgres::Transaction<'_>,
    lexemes: &[&str],
    stored: &[Stored<'_>],
) -> Result<(), StoreError> {
    let st = tx
        .prepare_cached(
            "SELECT lexeme, avgdl0, theta FROM klaw_memory_lists WHERE lexeme = ANY($1)
             UNION ALL
             SELECT b.lexeme, NULL, NULL FROM klaw_memory_list_builds b
             WHERE b.lexeme = ANY($1)
               AND NOT EXISTS (SELECT 1 FROM klaw_memory_lists l WHERE l.lexeme = b.lexeme)",
        )
        .await?;
    // a list's (avgdl0, theta), or none: being built
    let lists: HashMap<String, Option<(f64, f64)>> = tx
        .query(&st, &[&lexemes])
        .await?
        .iter()
        .map(|r| {
            let (avgdl0, theta): (Option<f64>, Option<f64>) = (r.get(1), r.get(2));
            (r.get(0), avgdl0.zip(theta))
        })
        .collect();
    if lists.is_empty() {
        return Ok(());
    }
    let (mut lex, mut ids, mut tfs, mut ntoks) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (id, ntok, words) in stored {
        for (l, tf) in words.iter() {
            let joins = match lists.get(l) {
                Some(Some((avgdl0, theta))) => part(*tf, *ntok, *avgdl0) > *theta,
                Some(None) => true,
                None => false,
            };
            if joins {
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

/// What one build of a list came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Built {
    /// The list is made (and installed).
    Made,
    /// Nothing to do: the word has a list, or is held by the threshold's chunks or fewer.
    NotNeeded,
    /// Another engine (or another store of this one) is building it: its advisory lock
    /// is taken.
    Busy,
}

/// The advisory lock under which `lexeme`'s list is built, a 64-bit key of its name:
/// taken with `pg_try_advisory_lock`, so that a second builder does not wait but gives up.
fn build_key(lexeme: &str) -> String {
    format!("klaw_memory_list:{lexeme}")
}

/// A pool connection that holds a session's advisory lock: closed (not given back to the
/// pool, which releases the lock) when dropped, unless [`release`](Self::release)d after
/// the lock was let go.
struct Held(Option<deadpool_postgres::Object>);

impl Held {
    fn client(&mut self) -> Option<&mut deadpool_postgres::Object> {
        self.0.as_mut()
    }

    /// Gives the connection back to the pool (its lock let go).
    fn release(mut self) {
        drop(self.0.take());
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(c) = self.0.take() {
            drop(deadpool_postgres::Object::take(c));
        }
    }
}

/// Builds `lexeme`'s list if it is held by more than `settings.threshold` chunks and has
/// none (see the module docs for why this keeps the answers exact): under the word's
/// advisory lock ([`Built::Busy`] at once when another holds it), in three steps, none
/// of which holds the lock of the word's row in `klaw_memory_terms` for long:
///
/// 1. under that row's lock, a mark in `klaw_memory_list_builds`: from its commit on,
///    every save of a chunk with the word puts the chunk in `klaw_memory_impacts`
///    (whatever its part: `theta` is not known yet), where the install finds it;
/// 2. without any lock, the best `settings.size + 1` chunks by the part at today's
///    `avgdl` (one statement: a snapshot taken after the mark's commit, so it has every
///    chunk saved before the mark);
/// 3. under the row's lock again, the install: `theta` is the part of the
///    `size + 1`-th, the best `size` join the chunks the saves put meanwhile (those of
///    them whose part is not above `theta` are dropped), chunks removed meanwhile are
///    left out, the mark goes and the list's head is written, in one transaction.
pub(super) async fn build(
    pool: &deadpool_postgres::Pool,
    lexeme: &str,
    settings: ListSettings,
) -> Result<Built, StoreError> {
    let c = pool.get().await.map_err(super::sql_err)?;
    let key = build_key(lexeme);
    let got: bool = c
        .query_one(
            "SELECT pg_try_advisory_lock(hashtextextended($1, 0))",
            &[&key],
        )
        .await?
        .get(0);
    if !got {
        return Ok(Built::Busy);
    }
    let mut held = Held(Some(c));
    let Some(c) = held.client() else {
        return Ok(Built::Busy);
    };
    let built = match build_locked(c, lexeme, settings).await {
        Ok(b) => Ok(b),
        Err(e) => {
            // the mark goes (the saves stop putting their chunks in the impacts); what
            // they put there stays harmless (a chunk with the word, found by the next
            // build as put by a save) and the next build starts over
            let _ = unmark(&*c, lexeme).await;
            Err(e)
        }
    };
    let unlocked = c
        .execute(
            "SELECT pg_advisory_unlock(hashtextextended($1, 0))",
            &[&key],
        )
        .await
        .is_ok();
    if unlocked {
        held.release();
    }
    built
}

/// Whether `lexeme` has a list.
async fn has_list(
    c: &impl deadpool_postgres::GenericClient,
    lexeme: &str,
) -> Result<bool, StoreError> {
    Ok(c.query_opt(
        "SELECT 1 FROM klaw_memory_lists WHERE lexeme = $1",
        &[&lexeme],
    )
    .await?
    .is_some())
}

/// Removes `lexeme`'s build mark: the saves stop putting its chunks aside.
async fn unmark(c: &impl deadpool_postgres::GenericClient, lexeme: &str) -> Result<(), StoreError> {
    c.execute(
        "DELETE FROM klaw_memory_list_builds WHERE lexeme = $1",
        &[&lexeme],
    )
    .await?;
    Ok(())
}

/// [`build`]'s three steps, its advisory lock held on `c`.
async fn build_locked(
    c: &mut deadpool_postgres::Object,
    lexeme: &str,
    settings: ListSettings,
) -> Result<Built, StoreError> {
    // 1. the mark, under the row's lock: a save that took the lock before has ended
    // (and is in the snapshot of step 2), one after finds the mark
    let tx = c.transaction().await?;
    let Some(ndoc) = tx
        .query_opt(
            "SELECT ndoc FROM klaw_memory_terms WHERE lexeme = $1 FOR UPDATE",
            &[&lexeme],
        )
        .await?
        .map(|r| r.get::<_, i64>(0))
    else {
        return Ok(Built::NotNeeded);
    };
    let made = has_list(&tx, lexeme).await?;
    if made || ndoc <= settings.threshold {
        return Ok(Built::NotNeeded);
    }
    tx.execute(
        "INSERT INTO klaw_memory_list_builds (lexeme) VALUES ($1)
         ON CONFLICT (lexeme) DO UPDATE SET since = now()",
        &[&lexeme],
    )
    .await?;
    tx.commit().await?;

    // 2. the best chunks, from a snapshot, no lock held
    let r = c
        .query_one("SELECT chunks, tokens FROM klaw_memory_stats", &[])
        .await?;
    let (n, tokens): (i64, i64) = (r.get(0), r.get(1));
    let avgdl0 = if n > 0 { tokens as f64 / n as f64 } else { 1.0 };
    // The part in SQL is `part`'s: the same IEEE double operations in the same order on
    // the same values (each a float8 parameter, not a decimal literal), so the same bits;
    // checked on every row read below, with a margin on `theta` if ever one differs. The
    // selection in SQL spares reading every chunk with the word into the engine.
    let limit = i64::try_from(settings.size).unwrap_or(i64::MAX - 1) + 1;
    let rows = c
        .query(
            "SELECT s.id, s.tf, s.ntok,
                    s.tf::float8 * $3::float8
                        / (s.tf::float8 + $4::float8 * ($5::float8
                           + $6::float8 * s.ntok::float8 / $7::float8)) AS part
             FROM (SELECT m.id, u.tf, m.ntok FROM klaw_memory_chunks m,
                       LATERAL (SELECT cardinality(x.positions) AS tf
                                FROM unnest(ts_filter(setweight(m.tsv, 'A', ARRAY[$1::text]),
                                                      '{a}')) x) u
                   WHERE m.tsv @@ $2::text::tsquery) s
             ORDER BY part DESC, s.id LIMIT $8",
            &[
                &lexeme,
                &quote_lexeme(lexeme),
                &(K1 + 1.0),
                &K1,
                &(1.0 - B),
                &B,
                &avgdl0,
                &limit,
            ],
        )
        .await?;
    let mut exact = true;
    let mut best: Vec<(f64, i64, i32, i32)> = Vec::with_capacity(rows.len());
    for r in &rows {
        let (id, tf, ntok, sql): (i64, i32, i32, f64) = (r.get(0), r.get(1), r.get(2), r.get(3));
        let p = part(tf, ntok, avgdl0);
        exact &= p.to_bits() == sql.to_bits();
        best.push((p, id, tf, ntok));
    }
    // with a part of SQL other than `part`'s (never seen), a chunk past the first
    // `size + 1` could have a `part` a few units in the last place above the `size +
    // 1`-th's: a relative margin far above that keeps `theta` a bound
    let margin = if exact { 1.0 } else { 1.0 + 1e-12 };
    let theta = best.get(settings.size).map_or(0.0, |r| r.0 * margin);
    if !exact {
        tracing::debug!(word = %lexeme, "memory: the part in SQL differs from the engine's; theta kept with a margin");
    }
    best.truncate(settings.size);
    if !settings.pause.is_zero() {
        tokio::time::sleep(settings.pause).await;
    }

    // 3. the install, under the row's lock
    let tx = c.transaction().await?;
    tx.execute(
        "SELECT 1 FROM klaw_memory_terms WHERE lexeme = $1 FOR UPDATE",
        &[&lexeme],
    )
    .await?;
    let made = has_list(&tx, lexeme).await?;
    if made {
        // made by an engine of before the marks, meanwhile: it stands
        unmark(&tx, lexeme).await?;
        tx.commit().await?;
        return Ok(Built::NotNeeded);
    }
    // the chunks the saves put meanwhile: those not above theta go (theta bounds them)
    let put = tx
        .query(
            "SELECT id, tf, ntok FROM klaw_memory_impacts WHERE lexeme = $1",
            &[&lexeme],
        )
        .await?;
    let below: Vec<i64> = put
        .iter()
        .filter(|r| part(r.get(1), r.get(2), avgdl0) <= theta)
        .map(|r| r.get(0))
        .collect();
    if !below.is_empty() {
        tx.execute(
            "DELETE FROM klaw_memory_impacts WHERE lexeme = $1 AND id = ANY($2)",
            &[&lexeme, &below],
        )
        .await?;
    }
    let ids: Vec<i64> = best.iter().map(|r| r.1).collect();
    let tfs: Vec<i32> = best.iter().map(|r| r.2).collect();
    let ntoks: Vec<i32> = best.iter().map(|r| r.3).collect();
    // a chunk removed since the snapshot is left out
    tx.execute(
        "INSERT INTO klaw_memory_impacts (lexeme, id, tf, ntok)
         SELECT $1, u.id, u.tf, u.ntok FROM unnest($2::int8[], $3::int4[], $4::int4[])
             AS u(id, tf, ntok)
         WHERE EXISTS (SELECT 1 FROM klaw_memory_chunks m WHERE m.id = u.id)
         ON CONFLICT DO NOTHING",
        &[&lexeme, &ids, &tfs, &ntoks],
    )
    .await?;
    tx.execute(
        "INSERT INTO klaw_memory_lists (lexeme, avgdl0, theta, ndoc) VALUES ($1, $2, $3, $4)",
        &[&lexeme, &avgdl0, &theta, &ndoc],
    )
    .await?;
    unmark(&tx, lexeme).await?;
    tx.commit().await?;
    Ok(Built::Made)
}

/// A store's builds of lists in the background: the words asked for, built one at a
/// time by one task on the pool's runtime, and when a word may be tried again after its
/// build failed or found another builder at work.
#[derive(Debug, Default)]
pub(super) struct Builds {
    state: std::sync::Mutex<BuildState>,
    /// Builds tried in the background, and those that failed.
    pub(super) tried: std::sync::atomic::AtomicU64,
    pub(super) failed: std::sync::atomic::AtomicU64,
}

#[derive(Debug, Default)]
struct BuildState {
    /// The words to build, in the order asked.
    queue: std::collections::VecDeque<String>,
    /// The words queued or being built.
    asked: std::collections::HashSet<String>,
    /// A word not to try before a time: its failures in a row, and that time.
    later: HashMap<String, (u32, std::time::Instant)>,
    /// Whether the task is running, and its handle (for [`Builds::wait`]).
    running: bool,
    task: Option<tokio::task::JoinHandle<()>>,
}

/// How long a word whose build failed `failures` times in a row waits before the next
/// try: 5 s, doubled each time, at most about 10 minutes.
fn backoff(failures: u32) -> std::time::Duration {
    std::time::Duration::from_secs(5) * 2u32.pow(failures.saturating_sub(1).min(7))
}

/// How long a word whose list another builder is making waits before it is asked again.
const BUSY_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

impl Builds {
    /// Asks for the lists of `lexemes` in the background (not waiting): a word queued or
    /// being built, or whose time to try again has not come, is left.
    pub(super) fn request(
        self: &std::sync::Arc<Self>,
        pool: &deadpool_postgres::Pool,
        handle: &tokio::runtime::Handle,
        lexemes: &[String],
        settings: ListSettings,
    ) {
        let Ok(mut st) = self.state.lock() else {
            return;
        };
        let now = std::time::Instant::now();
        for l in lexemes {
            if st.asked.contains(l) || st.later.get(l).is_some_and(|&(_, at)| now < at) {
                continue;
            }
            st.asked.insert(l.clone());
            st.queue.push_back(l.clone());
        }
        if st.running || st.queue.is_empty() {
            return;
        }
        st.running = true;
        let (me, pool) = (std::sync::Arc::clone(self), pool.clone());
        st.task = Some(handle.spawn(async move { me.work(pool, settings).await }));
    }

    /// The task: builds the queued words one by one until none is left.
    async fn work(
        self: std::sync::Arc<Self>,
        pool: deadpool_postgres::Pool,
        settings: ListSettings,
    ) {
        loop {
            let next = match self.state.lock() {
                Ok(mut st) => match st.queue.pop_front() {
                    Some(l) => l,
                    None => {
                        st.running = false;
                        return;
                    }
                },
                Err(_) => return,
            };
            let built = build(&pool, &next, settings).await;
            use std::sync::atomic::Ordering::Relaxed;
            self.tried.fetch_add(1, Relaxed);
            if built.is_err() {
                self.failed.fetch_add(1, Relaxed);
            }
            let Ok(mut st) = self.state.lock() else {
                return;
            };
            st.asked.remove(&next);
            let now = std::time::Instant::now();
            match built {
                Ok(Built::Made | Built::NotNeeded) => {
                    st.later.remove(&next);
                }
                Ok(Built::Busy) => {
                    let failures = st.later.get(&next).map_or(0, |x| x.0);
                    st.later.insert(next, (failures, now + BUSY_WAIT));
                }
                Err(e) => {
                    let failures = st.later.get(&next).map_or(0, |x| x.0) + 1;
                    let wait = backoff(failures);
                    tracing::warn!(
                        word = %next,
                        error = %e,
                        failures,
                        retry_in_s = wait.as_secs(),
                        "memory: building a word's impact list failed; its searches rank the postings meanwhile"
                    );
                    st.later.insert(next, (failures, now + wait));
                }
            }
        }
    }

    /// Waits (blocking) until no build is queued or running.
    pub(super) fn wait(&self, handle: &tokio::runtime::Handle) {
        loop {
            let task = match self.state.lock() {
                Ok(mut st) => st.task.take(),
                Err(_) => return,
            };
            match task {
                Some(t) => {
                    let _ = handle.block_on(t);
                }
                None => return,
            }
        }
    }
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
/// threshold, or the lists cannot prove it (then the caller ranks the postings). A
/// listed phrase whose list is not made yet (or is being built) is put in `unmade`
/// (for the caller to ask for it in the background) and the answer is `None`: a search
/// never waits for a list.
pub(super) async fn search(
    c: &mut deadpool_postgres::Object,
    r: &Ranking<'_>,
    settings: ListSettings,
    unmade: &mut Vec<String>,
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
    let lists = read(c, &wanted).await?;
    if lists.len() < wanted.len() {
        unmade.extend(wanted.into_iter().filter(|l| !lists.contains_key(l)));
        return Ok(None);
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
