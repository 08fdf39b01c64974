//! `web_search`: titles, URLs and snippets from Brave Search, or from a SearXNG instance
//! of your own.

use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use super::clients::Clients;
use super::settings::WebSettings;
use crate::{ToolContext, ToolError, ToolSchema, tool};

/// One search result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToolSchema)]
pub struct SearchHit {
    /// Заголовок страницы
    #[schema(description_en = "The page's title")]
    pub title: String,
    /// Адрес страницы
    #[schema(description_en = "The page's URL")]
    pub url: String,
    /// Фрагмент текста страницы
    #[schema(description_en = "A snippet of the page's text")]
    pub snippet: String,
}

/// The answer of `web_search`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToolSchema)]
pub struct SearchResults {
    /// Запрос
    #[schema(description_en = "The query")]
    pub query: String,
    /// Кто искал: brave или searxng
    #[schema(description_en = "Who searched: brave or searxng")]
    pub provider: String,
    /// Результаты по порядку
    #[schema(description_en = "The results, in order")]
    pub results: Vec<SearchHit>,
}

/// Searches the web.
#[tool(
    name = "web_search",
    title_ru = "Поиск в интернете",
    title_en = "Search the web",
    description_ru = "Ищет в интернете (Brave Search или SearXNG) и возвращает заголовки, адреса и фрагменты лучших результатов. Чтобы прочитать страницу, вызови web_fetch с её адресом.",
    description_en = "Searches the web (Brave Search or SearXNG) and returns the titles, URLs and snippets of the top results. To read a page, call web_fetch with its URL.",
    read_only,
    open_world,
    timeout = "90s"
)]
pub async fn web_search(
    ctx: ToolContext,
    /// Поисковый запрос
    #[arg(description_en = "The search query")]
    query: String,
    /// Сколько результатов вернуть, от 1 до 20 (по умолчанию 5)
    #[arg(
        default = 5,
        minimum = 1,
        maximum = 20,
        description_en = "How many results to return, 1 to 20 (default 5)"
    )]
    count: usize,
) -> Result<SearchResults, ToolError> {
    let query = query.trim().to_owned();
    if query.is_empty() {
        return Err(ToolError::invalid_arguments(
            "/query",
            "empty: say what to look for",
        ));
    }
    let settings = WebSettings::of(&ctx);
    let client = ctx.shared_state::<Clients>().search(&settings)?.clone();
    let (provider, results) = if let Some(key) = &settings.brave_api_key {
        (
            "brave",
            brave(&client, &settings, key, &query, count).await?,
        )
    } else if let Some(base) = &settings.searxng_url {
        (
            "searxng",
            searxng(&client, &settings, base, &query, count).await?,
        )
    } else {
        return Err(ToolError::unavailable(
            "web search is not configured: set BRAVE_API_KEY (or web.braveApiKey) to a Brave \
             Search API key, or web.searxngUrl to a SearXNG instance",
        ));
    };
    Ok(SearchResults {
        query,
        provider: provider.into(),
        results,
    })
}

/// Asks Brave; a 429 is retried once after its `Retry-After` (up to 10 s).
async fn brave(
    client: &reqwest::Client,
    settings: &WebSettings,
    key: &str,
    query: &str,
    count: usize,
) -> Result<Vec<SearchHit>, ToolError> {
    let url = with_query(
        &settings.brave_endpoint,
        &[("q", query), ("count", &count.to_string())],
    )?;
    let ask = || {
        client
            .get(url.clone())
            .header(reqwest::header::ACCEPT, "application/json")
            .header("X-Subscription-Token", key)
            .timeout(settings.timeout)
            .send()
    };
    let mut response = ask().await.map_err(|e| transport("Brave Search", &e))?;
    if response.status().as_u16() == 429 {
        let wait = retry_after(&response);
        if wait > Duration::from_secs(10) {
            return Err(ToolError::unavailable(format!(
                "Brave Search is rate-limited (429); try again in {} s",
                wait.as_secs()
            )));
        }
        tokio::time::sleep(wait).await;
        response = ask().await.map_err(|e| transport("Brave Search", &e))?;
    }
    let body = answer("Brave Search", response).await?;
    Ok(hits(&body["web"]["results"], "description", count))
}

/// Asks a SearXNG instance (its JSON format must be enabled).
async fn searxng(
    client: &reqwest::Client,
    settings: &WebSettings,
    base: &str,
    query: &str,
    count: usize,
) -> Result<Vec<SearchHit>, ToolError> {
    let url = with_query(
        &format!("{}/search", base.trim_end_matches('/')),
        &[("q", query), ("format", "json")],
    )?;
    let response = client
        .get(url)
        .header(reqwest::header::ACCEPT, "application/json")
        .timeout(settings.timeout)
        .send()
        .await
        .map_err(|e| transport("SearXNG", &e))?;
    let body = answer("SearXNG", response).await?;
    Ok(hits(&body["results"], "content", count))
}

/// `endpoint` with `params` in its query.
fn with_query(endpoint: &str, params: &[(&str, &str)]) -> Result<url::Url, ToolError> {
    url::Url::parse_with_params(endpoint, params).map_err(|e| {
        ToolError::unavailable(format!(
            "the search endpoint `{endpoint}` is not a URL: {e}"
        ))
    })
}

/// `Retry-After` in seconds (1 s when absent or a date).
fn retry_after(response: &reqwest::Response) -> Duration {
    let seconds = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(1);
    Duration::from_secs(seconds)
}

/// The JSON of a successful answer, or the error for its status.
async fn answer(provider: &str, response: reqwest::Response) -> Result<Value, ToolError> {
    let status = response.status().as_u16();
    match status {
        200..=299 => {}
        401 | 403 => {
            return Err(ToolError::access_denied(format!(
                "{provider} refused the request ({status}): check the API key \
                 (BRAVE_API_KEY or web.braveApiKey)"
            )));
        }
        429 => {
            return Err(ToolError::unavailable(format!(
                "{provider} is rate-limited (429); try again later"
            )));
        }
        500..=599 => {
            return Err(ToolError::unavailable(format!(
                "{provider} is failing ({status}); try again later"
            )));
        }
        _ => {
            return Err(ToolError::failed(format!("{provider} answered {status}")));
        }
    }
    let bytes = response
        .bytes()
        .await
        .map_err(|e| transport(provider, &e))?;
    serde_json::from_slice(&bytes).map_err(|e| {
        ToolError::failed(format!(
            "{provider} answered something that is not JSON: {e}"
        ))
    })
}

fn transport(provider: &str, e: &reqwest::Error) -> ToolError {
    if e.is_timeout() {
        return ToolError::timeout(format!("{provider} did not answer in time"));
    }
    ToolError::unavailable(format!(
        "cannot reach {provider}: {}",
        super::fetch::innermost(e)
    ))
}

/// At most `count` results of a JSON array (`title`, `url`, and the snippet under
/// `snippet_key`), markup removed from the texts.
fn hits(results: &Value, snippet_key: &str, count: usize) -> Vec<SearchHit> {
    results
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter_map(|r| {
            Some(SearchHit {
                title: strip_tags(r["title"].as_str()?),
                url: r["url"].as_str()?.to_owned(),
                snippet: strip_tags(r[snippet_key].as_str().unwrap_or_default()),
            })
        })
        .take(count)
        .collect()
}

/// `text` without `<tags>` and with the common entities decoded.
fn strip_tags(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_tag = false;
    for c in text.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.replace("&amp;", "&")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_are_read_and_cleaned() {
        let body = serde_json::json!([
            {"title": "<strong>Rust</strong> &amp; you", "url": "https://rust-lang.org", "description": "A <b>language</b>"},
            {"title": "no url"},
            {"title": "Two", "url": "https://two.example", "description": "second"},
            {"title": "Three", "url": "https://three.example"},
        ]);
        let got = hits(&body, "description", 2);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].title, "Rust & you");
        assert_eq!(got[0].snippet, "A language");
        assert_eq!(got[1].url, "https://two.example");
        assert!(hits(&Value::Null, "description", 5).is_empty());
    }
}
