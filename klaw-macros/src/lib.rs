//! Procedural macros of Klaw: `#[tool]` turns an async fn into a tool, and
//! `#[derive(ToolSchema)]` gives a struct or enum a compile-time schema so it can be a
//! tool argument or result. Use them through `klaw`, `klaw-core` or `klaw-tools`, which
//! re-export them; see `doc/writing-tools.md` for every attribute and every error.

mod ast;
mod attr;
mod ctxt;
mod derive;
mod expand;
mod krate;
mod names;
mod valid;

use proc_macro::TokenStream;

/// Turns an `async fn` into a tool an LLM agent can call.
///
/// ```ignore
/// #[tool(name = "file_read", description_ru = "Читает файл", read_only)]
/// async fn file_read(ws: Workspace, /// Путь
///                    path: String) -> Result<String, ToolError> { ... }
/// ```
///
/// Attribute keys: `name`, `description_ru` (required), `description_en`, `read_only`,
/// `destructive`, `idempotent`, `open_world`, `timeout = "30s"`, `rename_all =
/// "camelCase"`, `crate = "path"`. Parameters take `#[arg(rename, alias, default,
/// description_ru, description_en, minimum, maximum, schemars)]` and doc comments.
///
/// Context extractors are injected, not sent by the model: a parameter marked `#[ctx]` is
/// one (its type implements `FromToolContext`), a parameter marked `#[arg]` or
/// `#[arg(...)]` is an argument, and an unmarked parameter is an extractor when the last
/// segment of its type is a built-in one (`ToolContext`, `Workspace`, `DataDir`,
/// `Limits`, `Settings`, `Caller`, `Cancel`, `Progress`, `Log`, `State`). So a type of
/// your own named `Settings` is an argument with `#[arg]`. `#[ctx]` and `#[arg]` together
/// are an error.
#[proc_macro_attribute]
pub fn tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand::tool(attr.into(), item.into()).into()
}

/// Derives `ToolSchema` for a struct with named fields or an enum of unit variants,
/// following its `#[serde(rename, rename_all, default, skip)]` attributes. Doc comments
/// become descriptions (Russian); `#[schema(description_en = "...")]` adds English.
#[proc_macro_derive(ToolSchema, attributes(schema))]
pub fn derive_tool_schema(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    derive::expand(&input).into()
}
