//! Shared by the memory benches (`benches/memory.rs`, `benches/memory_latency.rs`): the
//! real model, the retrieval test set's notes and questions, and big stores built from
//! realistic filler.
//!
//! A big store holds the test set's notes with their real embeddings plus filler chunks:
//! texts made from a fixed-seed mix of Russian and English words (a few sentences each,
//! 50 to 200 tokens, like real chunks) with **random unit vectors** (fixed seed).
//! Embedding 100k texts with the model would take hours on a laptop, and sqlite-vec's
//! `vec0` is a brute-force scan, so search latency does not depend on the vectors' values;
//! the full-text side does depend on the words, hence real vocabulary with a Zipf-like
//! spread. The databases are cached in `CARGO_TARGET_TMPDIR` (under the target directory),
//! keyed by size and by the model's fingerprint, so reruns do not rebuild them.

use std::path::PathBuf;

// Not an API: a store filled with chosen vectors (see the module docs).
use klaw_memory::bench_support::{MemoryStore, NewChunk};
use klaw_memory::{Embedder, EmbedderConfig, Index, MemoryConfig};
use serde::Deserialize;

/// The retrieval test set (`tests/data/retrieval.json`).
#[derive(Deserialize)]
pub(crate) struct TestSet {
    /// The notes.
    pub(crate) notes: Vec<Note>,
    /// The questions.
    pub(crate) questions: Vec<Question>,
}

/// A note of the test set.
#[derive(Deserialize)]
pub(crate) struct Note {
    /// Its id.
    #[allow(dead_code)] // read by memory_recall only
    pub(crate) id: String,
    /// Its text.
    pub(crate) text: String,
}

/// A question of the test set.
#[derive(Deserialize)]
pub(crate) struct Question {
    /// Its text.
    pub(crate) q: String,
    /// The ids of the notes that answer it.
    #[allow(dead_code)] // read by memory_recall only
    pub(crate) relevant: Vec<String>,
}

/// The retrieval test set.
pub(crate) fn test_set() -> TestSet {
    serde_json::from_str(include_str!("../../tests/data/retrieval.json")).unwrap()
}

/// The model from the cache, loaded.
pub(crate) fn embedder() -> Embedder {
    let e = Embedder::new(EmbedderConfig::from_cache().unwrap_or_else(|e| panic!("{e}")));
    e.load().unwrap_or_else(|e| panic!("{e}"));
    e
}

/// splitmix64: a small deterministic generator.
pub(crate) struct Rng(u64);

impl Rng {
    /// A generator with a fixed seed.
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `lo..=hi`.
    pub(crate) fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next_u64() % (hi - lo + 1) as u64) as usize
    }

    /// A word of `vocab`, the first ones more often (weight `1 / (rank + 2)`).
    fn zipf<'a>(&mut self, vocab: &[&'a str]) -> &'a str {
        // Inverse of the CDF of 1/(x+2) over [0, n): ln((x+2)/2) / ln((n+2)/2).
        let n = vocab.len() as f64;
        let x = 2.0 * ((n + 2.0) / 2.0).powf(self.unit()) - 2.0;
        vocab[(x as usize).min(vocab.len() - 1)]
    }
}

#[rustfmt::skip]
const EN: &[&str] = &[
    "the", "a", "to", "and", "of", "in", "is", "for", "on", "with", "it", "we", "that",
    "this", "be", "at", "not", "from", "by", "after", "user", "server", "meeting",
    "project", "deploy", "needs", "should", "check", "before", "next", "week", "Monday",
    "Friday", "team", "new", "config", "error", "database", "backup", "release",
    "customer", "invoice", "order", "call", "email", "report", "review", "fix", "bug",
    "test", "build", "version", "update", "access", "password", "account", "budget",
    "plan", "notes", "doctor", "appointment", "school", "birthday", "gift", "flight",
    "hotel", "ticket", "payment", "card", "bank", "rent", "apartment", "car", "service",
    "repair", "contract", "deadline", "manager", "client", "request", "latency",
    "memory", "disk", "network", "proxy", "cache", "queue", "worker", "logs", "alert",
    "incident", "rollback", "migration", "schema", "index", "query", "timeout", "retry",
    "limit", "quota", "token", "key", "certificate", "domain", "backend", "frontend",
    "mobile", "app", "dashboard", "metrics", "cluster", "node", "pod", "container",
    "image", "pipeline", "runner", "branch", "merge", "commit", "tag", "weekend",
    "morning", "evening", "lunch", "dinner", "coffee", "tea", "gym", "run", "swim",
    "holiday", "trip", "train", "bus", "airport", "weather", "rain", "garden",
    "kitchen", "recipe", "book", "movie", "music", "concert", "course", "lesson",
    "language", "Spanish", "English", "price", "discount", "delivery", "package",
    "return", "refund", "warranty", "insurance", "tax",
];

#[rustfmt::skip]
const RU: &[&str] = &[
    "и", "в", "не", "на", "что", "с", "по", "к", "это", "для", "как", "мы", "он", "она",
    "надо", "нужно", "после", "до", "завтра", "сегодня", "неделе", "пользователь",
    "сервер", "встреча", "проект", "деплой", "проверить", "перед", "следующей",
    "понедельник", "пятницу", "команда", "новый", "конфиг", "ошибка", "база", "данных",
    "бэкап", "релиз", "клиент", "счёт", "заказ", "звонок", "письмо", "отчёт", "ревью",
    "исправить", "баг", "тест", "сборка", "версия", "обновление", "доступ", "пароль",
    "аккаунт", "бюджет", "план", "заметки", "врач", "запись", "школа", "день",
    "рождения", "подарок", "рейс", "гостиница", "билет", "оплата", "карта", "банк",
    "аренда", "квартира", "машина", "сервис", "ремонт", "договор", "срок", "менеджер",
    "заявка", "задержка", "память", "диск", "сеть", "прокси", "кэш", "очередь",
    "воркер", "логи", "алерт", "инцидент", "откат", "миграция", "схема", "индекс",
    "запрос", "таймаут", "повтор", "лимит", "квота", "токен", "ключ", "сертификат",
    "домен", "бэкенд", "фронтенд", "приложение", "дашборд", "метрики", "кластер",
    "узел", "контейнер", "образ", "пайплайн", "ветка", "коммит", "выходные", "утром",
    "вечером", "обед", "ужин", "кофе", "чай", "спортзал", "пробежка", "бассейн",
    "отпуск", "поездка", "поезд", "автобус", "аэропорт", "погода", "дождь", "дача",
    "кухня", "рецепт", "книга", "фильм", "музыка", "концерт", "курс", "урок", "язык",
    "испанский", "английский", "цена", "скидка", "доставка", "посылка", "возврат",
    "гарантия", "страховка", "налог", "бабушка", "мама", "папа", "дочь", "жена",
    "сосед", "друзья", "семья", "детский", "сад", "кот",
];

/// A filler text: 3 to 10 sentences of 6 to 14 words, all Russian or all English.
pub(crate) fn filler_text(rng: &mut Rng) -> String {
    let vocab = if rng.next_u64().is_multiple_of(2) {
        EN
    } else {
        RU
    };
    let sentences = rng.range(3, 10);
    let mut out = String::new();
    for s in 0..sentences {
        let words = rng.range(6, 14);
        for w in 0..words {
            let word = rng.zipf(vocab);
            if w == 0 {
                let mut c = word.chars();
                if let Some(first) = c.next() {
                    out.extend(first.to_uppercase());
                    out.push_str(c.as_str());
                }
            } else {
                out.push(' ');
                out.push_str(word);
            }
        }
        // a number now and then, like the dates and amounts of real notes
        if rng.next_u64().is_multiple_of(4) {
            out.push_str(&format!(" {}", rng.range(1, 99_999)));
        }
        out.push('.');
        if s + 1 < sentences {
            out.push(' ');
        }
    }
    out
}

/// A random unit vector (Box-Muller normals, normalised).
pub(crate) fn random_unit(rng: &mut Rng, dims: usize) -> Vec<f32> {
    let mut v: Vec<f32> = (0..dims)
        .map(|_| {
            let (u1, u2) = (rng.unit().max(f64::MIN_POSITIVE), rng.unit());
            ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()) as f32
        })
        .collect();
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter_mut().for_each(|x| *x /= norm);
    v
}

/// [`big_store`] as an [`Index`] with the default configuration: what `memory_search`
/// calls.
pub(crate) fn big_index(n: usize, embedder: &Embedder) -> Index {
    let path = big_store_path(n, embedder);
    drop(big_store(n, embedder));
    Index::open(&path, embedder.clone(), &MemoryConfig::default()).unwrap()
}

fn big_store_path(n: usize, embedder: &Embedder) -> PathBuf {
    let tag: String = embedder
        .fingerprint()
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .rev()
        .take(12)
        .collect();
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("klaw-memory-bench-v2-{n}-{tag}.sqlite"))
}

/// A store of about `n` chunks: the test set's notes, really embedded, then filler.
/// Cached in `CARGO_TARGET_TMPDIR`; built on first use (inserts in transactions of 10k).
pub(crate) fn big_store(n: usize, embedder: &Embedder) -> MemoryStore {
    let fp = embedder.fingerprint();
    let path = big_store_path(n, embedder);
    if path.exists() {
        if let Ok(store) = MemoryStore::open(&path, embedder.dims(), fp)
            && store.len().unwrap() >= n * 99 / 100
        {
            return store;
        }
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }
    let start = std::time::Instant::now();
    eprintln!("building {} ...", path.display());
    let mut store = MemoryStore::open(&path, embedder.dims(), fp).unwrap();
    let set = test_set();
    let texts: Vec<&str> = set.notes.iter().map(|n| n.text.as_str()).collect();
    let real: Vec<NewChunk> = texts
        .iter()
        .zip(embedder.embed_passages(&texts).unwrap())
        .enumerate()
        .map(|(i, (t, vector))| chunk(t.to_string(), vector, i))
        .collect();
    store.insert(&real).unwrap();
    let mut rng = Rng::new(0x5EED_0000 + n as u64);
    let mut left = n.saturating_sub(real.len());
    while left > 0 {
        let first = n - left;
        let batch: Vec<NewChunk> = (first..first + left.min(10_000))
            .map(|i| {
                let text = filler_text(&mut rng);
                chunk(text, random_unit(&mut rng, embedder.dims()), i)
            })
            .collect();
        left -= batch.len();
        store.insert(&batch).unwrap();
    }
    eprintln!(
        "built {} chunks in {:.1} s",
        store.len().unwrap(),
        start.elapsed().as_secs_f64()
    );
    store
}

/// The first chunk's time; each next one is [`CHUNK_EVERY`] seconds later (100k chunks
/// span 694 days), so searches within a period have something to filter.
pub(crate) const FIRST_CHUNK_AT: i64 = 1_600_000_000;
/// Seconds between two chunks' times.
pub(crate) const CHUNK_EVERY: i64 = 600;

fn chunk(content: String, vector: Vec<f32>, i: usize) -> NewChunk {
    NewChunk {
        content,
        source: "bench".to_string(),
        created_at: Some(FIRST_CHUNK_AT + i as i64 * CHUNK_EVERY),
        context: None,
        vector,
        more_vectors: Vec::new(),
    }
}
