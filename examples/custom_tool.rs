//! Run with: cargo run --example custom_tool --features testing
//!
//! A custom tool in a few lines, called by name through the same validation and
//! dispatch the engine uses, with a temporary workspace from `klaw::testing`.

use klaw::testing::Kit;
use klaw::{ToolError, Workspace, tool};

/// Counts the words of a text file in the workspace.
#[tool(
    name = "word_count",
    description_ru = "Считает слова в текстовом файле рабочей области",
    description_en = "Count the words of a text file in the workspace",
    read_only
)]
async fn word_count(
    ws: Workspace,
    /// Путь к файлу относительно рабочей области
    #[arg(description_en = "File path relative to the workspace")]
    path: String,
    /// Сколько самых частых слов показать
    #[arg(rename = "top", default = 3)]
    top_n: usize,
) -> Result<String, ToolError> {
    // A real file tool confines paths in the kernel; this example only reads plain names.
    if path.contains('/') || path.starts_with('.') {
        return Err(ToolError::access_denied(
            "this example reads plain file names only",
        ));
    }
    let text = std::fs::read_to_string(ws.root().join(&path))
        .map_err(|e| ToolError::from(e).with_detail(format!("reading {path}")))?;
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for w in text.split_whitespace() {
        *counts.entry(w.to_lowercase()).or_default() += 1;
    }
    let mut top: Vec<_> = counts.iter().collect();
    top.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let top: Vec<String> = top
        .iter()
        .take(top_n)
        .map(|(w, n)| format!("{w}={n}"))
        .collect();
    Ok(format!(
        "{} words; top: {}",
        text.split_whitespace().count(),
        top.join(", ")
    ))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let kit = Kit::new()?;
    kit.write("poem.txt", "мороз и солнце день чудесный мороз и солнце")?;
    let out = kit
        .call("word_count", serde_json::json!({"path": "poem.txt"}))
        .await?;
    println!("{}", out.text());
    let Err(err) = kit
        .call(
            "word_count",
            serde_json::json!({"path": "../etc/passwd", "top": "all"}),
        )
        .await
    else {
        anyhow::bail!("a bad call was accepted");
    };
    println!("{}", err.to_model_text());
    Ok(())
}
