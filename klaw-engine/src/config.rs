//! `engine.json`: every key with its default, environment overrides, and errors that
//! name the key (or the line and column of broken JSON).

use std::path::{Path, PathBuf};
use std::time::Duration;

use klaw_tools::tools::files::FilesSettings;
use klaw_tools::tools::shell::{SandboxMode, ShellSettings};
use klaw_tools::tools::web::WebSettings;
use klaw_tools::{Lang, Limits, Settings};

pub mod keys;
mod mcp_servers;
mod storage;
mod types;

pub use types::{Approval, Protocol, Provider};

pub use keys::KeyDoc;
use keys::{Section, at_least, at_least_if_set, between, section};
use mcp_servers::check_servers;
pub use mcp_servers::{MAX_SERVER_NAME, McpServer, ServerType, valid_server_name};
pub use storage::{DatabaseUrl, StorageSection};

section! {
    /// The engine's configuration, as read from `engine.json`. Every key is optional;
    /// each is declared once below (see [`keys`]), which gives its default, variable,
    /// checks and the documentation's row.
    pub struct EngineConfig {
        keys {
            /// The agent's workspace directory (its files, workspace skills).
            workspace: Option<PathBuf> = None;
                key "workspace", env "KLAW_WORKSPACE", type "string (path) or `null`",
                shown "`<dataDir>/workspace`";
            /// The data directory (databases, core memory, models, system skills).
            data_dir: Option<PathBuf> = None;
                key "dataDir", env "KLAW_DATA", type "string (path) or `null`",
                shown "`$XDG_DATA_HOME/klaw`, else `~/.local/share/klaw`";
            /// The user's time zone; `current_time` uses it when no zone is given.
            timezone: Option<String> = None;
                key "timezone", env "KLAW_TIMEZONE", type "string (IANA name) or `null`",
                shown "`TZ`, else the system's zone, else `UTC`";
            /// Language of tool descriptions sent to models.
            language: Lang = Lang::Ru;
                key "language", env "KLAW_LANGUAGE", type "`\"ru\"` or `\"en\"`";
            /// Largest file a tool may write, in bytes.
            max_file_size_bytes: u64 = Limits::default().max_file_size_bytes;
                key "maxFileSizeBytes", env "KLAW_MAX_FILE_SIZE_BYTES",
                type "integer, 1 to 2^64−1", shown "`1048576` (1 MiB)", check at_least(1);
            /// Most consecutive rounds of tool calls in one agent turn.
            max_tool_call_rounds: u32 = 10;
                key "maxToolCallRounds", env "KLAW_MAX_TOOL_CALL_ROUNDS",
                type "integer, 1 to 4294967295", check at_least(1);
            /// Time limit, in seconds, of a tool that declares no timeout of its own.
            tool_timeout_seconds: u64 = Limits::default().tool_timeout.as_secs();
                key "toolTimeoutSeconds", env "KLAW_TOOL_TIMEOUT_SECONDS",
                type "integer, 1 to 2^64−1", check at_least(1);
            /// Most bytes returned by one read. Used by the file tools.
            max_read_bytes: u64 = Limits::default().max_read_bytes;
                key "maxReadBytes", env "KLAW_MAX_READ_BYTES", type "integer, 1 to 2^64−1",
                shown "`262144` (256 KiB)", check at_least(1);
            /// Most entries returned by one directory listing. Used by the file tools.
            max_list_entries: usize = FilesSettings::default().max_list_entries;
                key "maxListEntries", env "KLAW_MAX_LIST_ENTRIES", type "integer ≥ 1",
                check at_least(1);
            /// Time limit, in seconds, of a shell command that asks for none. Used by the
            /// shell tools.
            exec_timeout_seconds: u64 = ShellSettings::default().timeout.as_secs();
                key "execTimeoutSeconds", env "KLAW_EXEC_TIMEOUT_SECONDS",
                type "integer, 1 to `execMaxTimeoutSeconds`", check within_max_timeout;
            /// Largest time limit, in seconds, a shell command may ask for. Used by the
            /// shell tools.
            exec_max_timeout_seconds: u64 = ShellSettings::default().max_timeout.as_secs();
                key "execMaxTimeoutSeconds", env "KLAW_EXEC_MAX_TIMEOUT_SECONDS",
                type "integer, 1 to 2^64−1", check at_least(1);
            /// Most bytes kept of each output stream of a command. Used by the shell tools.
            exec_max_output_bytes: usize = ShellSettings::default().max_output_bytes;
                key "execMaxOutputBytes", env "KLAW_EXEC_MAX_OUTPUT_BYTES",
                type "integer ≥ 1", shown "`65536` (64 KiB)", check at_least(1);
            /// Most background processes at once. Used by the shell tools.
            max_processes: usize = ShellSettings::default().max_processes;
                key "maxProcesses", env "KLAW_MAX_PROCESSES", type "integer ≥ 1",
                check at_least(1);
            /// Which OS sandbox shell commands run in. Used by the shell tools.
            sandbox: SandboxMode = ShellSettings::default().sandbox;
                key "sandbox", env "KLAW_SANDBOX",
                type "`\"auto\"`, `\"bwrap\"`, `\"landlock\"` or `\"off\"`";
            /// Whether shell commands may use the network. Used by the shell tools.
            network: bool = ShellSettings::default().network;
                key "network", env "KLAW_NETWORK", type "`true` or `false`";
            /// Log filter: a level (`off`, `error`, `warn`, `info`, `debug`, `trace`), or
            /// `target=level` directives such as `info,klaw::tools=debug`.
            log_level: String = "warn".into();
                key "logLevel", env "KLAW_LOG_LEVEL", type "string (log filter)",
                check valid_log_filter;
            /// MCP servers whose tools are imported as `<server>__<tool>`: `{"name":
            /// {"command", "args", "env", "cwd"}}` for stdio, `{"name": {"type": "http",
            /// "url", "headers"}}` for Streamable HTTP, each with `enabled`,
            /// `startupTimeoutSeconds` (10) and `callTimeoutSeconds` (60); `${VAR}` is
            /// expanded (see [mcp-import.md](../mcp-import.md)).
            mcp_servers: std::collections::BTreeMap<String, McpServer> = Default::default();
                key "mcpServers", type "object: name → server", check check_servers;
        }
        sections {
            /// Memory: the embedding model, its runtime, search weights, chunking (see
            /// [The `memory` section](#the-memory-section)).
            memory: MemorySection; key "memory";
            /// The MCP server (`klaw-engine mcp`; see [The `mcp` section](#the-mcp-section)).
            mcp: McpSection; key "mcp";
            /// Skills: the system prompt's budget for them, `allowed-tools` (see
            /// [The `skills` section](#the-skills-section)).
            skills: SkillsSection; key "skills";
            /// The model the agent talks to (`klaw-engine chat`, `run`; see
            /// [The `llm` section](#the-llm-section)).
            llm: LlmSection; key "llm";
            /// The agent loop: approval of tool calls, history (see
            /// [The `agent` section](#the-agent-section)).
            agent: AgentSection; key "agent";
            /// The channels of `klaw-engine run` and the chat whitelist (see
            /// [The `gateway` section](#the-gateway-section)).
            gateway: GatewaySection; key "gateway";
            /// The web tools: caps, private services they may reach, search providers
            /// (see [The `web` section](#the-web-section)).
            web: WebSection; key "web";
            /// Scheduled jobs (`schedule_add`, fired by `klaw-engine run`; see
            /// [The `scheduler` section](#the-scheduler-section)).
            scheduler: SchedulerSection; key "scheduler";
            /// OpenTelemetry: where the engine's spans are exported (see
            /// [The `telemetry` section](#the-telemetry-section)).
            telemetry: TelemetrySection; key "telemetry";
            /// The database engines share (see [The `storage` section](#the-storage-section)).
            storage: StorageSection; key "storage";
        }
    }
}

/// The model `make setup` installs and memory uses unless `memory.model` says otherwise.
pub const DEFAULT_MEMORY_MODEL: &str = "use-multilingual-v3";
/// The ONNX Runtime library `make setup` installs, under `<cache>/onnxruntime/`.
pub const DEFAULT_RUNTIME_LIBRARY: &str = "libonnxruntime.so.1.31.1";

section! {
    /// The `memory` section of `engine.json`. Every key is optional. (The defaults of
    /// chunking and weights are memory's own; a test checks that they agree.)
    pub struct MemorySection {
        keys {
            /// A name is a directory under `<cache>/models/`: `use-multilingual-v3` (the
            /// default: the Universal Sentence Encoder, 16 languages, best across Russian and
            /// English), `multilingual-e5-small` (~100 languages) or `all-minilm-l6-v2`
            /// (light, English only). Changing it re-embeds the indexes on open. A value
            /// with a `/`, or starting with `~` or `.`, is the path of a model directory
            /// (`model.onnx`, `tokenizer.json`, `klaw-model.json`). A list of several
            /// (`["use-multilingual-v3", "multilingual-e5-small"]`; in the variable,
            /// separated by commas) embeds every text with each, one vector space per
            /// model, and search adds them up, the first leading: better recall for
            /// every text embedded twice (see doc/memory.md, "Two models").
            model: MemoryModels = DEFAULT_MEMORY_MODEL.into();
                key "model", env "KLAW_MEMORY_MODEL",
                type "string: a model name or a directory path; or an array of them", check model_named;
            /// The ONNX Runtime shared library (version 1.31; `ort` 2.0.0-rc.15 is built
            /// for it).
            runtime_library: Option<PathBuf> = None;
                key "runtimeLibrary", env "KLAW_MEMORY_RUNTIME_LIBRARY",
                type "string (path) or `null`",
                shown "`<cache>/onnxruntime/libonnxruntime.so.1.31.1`";
            /// ONNX Runtime intra-op threads for the model (inter-op: 1; threads do not
            /// spin while idle).
            threads: Option<usize> = None;
                key "threads", env "KLAW_MEMORY_THREADS", type "integer ≥ 1, or `null`",
                shown "one per core", check at_least_if_set(1);
            /// Token budget of a chunk when saved text is cut up (tokens estimated as
            /// characters / 4).
            chunk_tokens: usize = 256;
                key "chunkTokens", env "KLAW_MEMORY_CHUNK_TOKENS", type "integer ≥ 8",
                check at_least(8);
            /// Tokens a chunk repeats from the end of the previous paragraph.
            chunk_overlap: usize = 32;
                key "chunkOverlap", env "KLAW_MEMORY_CHUNK_OVERLAP",
                type "integer, 0 to less than `chunkTokens / 2`", check overlap_below_half;
        }
        sections {
            /// Hybrid search: how much each side counts in the fusion.
            weights: MemoryWeights; key "weights";
        }
    }
}

section! {
    /// The `mcp` section of `engine.json`: the MCP server over HTTP
    /// (`klaw-engine mcp --http`). Every key is optional.
    pub struct McpSection {
        keys {
            /// Address and port the HTTP server listens on (`klaw-engine mcp --http`
            /// without an address). Anything but a loopback address needs `mcp.token`.
            bind: String = "127.0.0.1:8765".into();
                key "bind", env "KLAW_MCP_BIND", type "string: `host:port`",
                check valid_bind;
            /// Bearer token every HTTP request must carry (`Authorization: Bearer ...`);
            /// required for a non-loopback `bind`. Never printed (`config` shows `"***"`).
            token: Option<Secret> = None;
                key "token", env "KLAW_MCP_TOKEN", type "string (at least 16 characters) or `null`",
                check token_long_enough;
            /// Extra `Host` names the HTTP server answers to, besides `localhost`,
            /// `127.0.0.1`, `::1` and the `bind` host (DNS-rebinding protection).
            allowed_hosts: Vec<String> = Vec::new();
                key "allowedHosts", env "KLAW_MCP_ALLOWED_HOSTS",
                type "array of strings";
            /// Browser origins allowed to call the HTTP server (`Origin` header), e.g.
            /// `https://app.example.com`; requests from other origins get 403. Requests
            /// without `Origin` (not from a browser) are not affected.
            allowed_origins: Vec<String> = Vec::new();
                key "allowedOrigins", env "KLAW_MCP_ALLOWED_ORIGINS",
                type "array of strings";
            /// Largest HTTP request body, in bytes; a bigger one gets 413.
            max_body_bytes: usize = 4_194_304;
                key "maxBodyBytes", env "KLAW_MCP_MAX_BODY_BYTES", type "integer ≥ 1024",
                shown "`4194304` (4 MiB)", check at_least(1024);
            /// Most tool calls running at once over MCP (all sessions together); more wait.
            max_concurrent_calls: usize = 16;
                key "maxConcurrentCalls", env "KLAW_MCP_MAX_CONCURRENT_CALLS",
                type "integer ≥ 1", check at_least(1);
            /// Serve MCP over HTTP at `bind` as part of `klaw-engine run`.
            enabled: bool = false;
                key "enabled", env "KLAW_MCP_ENABLED", type "`true` or `false`";
            /// Tools per `tools/list` page.
            page_size: usize = 100;
                key "pageSize", env "KLAW_MCP_PAGE_SIZE", type "integer ≥ 1",
                check at_least(1);
            /// Seconds a connection has to send a request's headers (the first one, and each
            /// next one on a kept-alive connection); a slower one is closed.
            header_timeout_seconds: u64 = 10;
                key "headerTimeoutSeconds", env "KLAW_MCP_HEADER_TIMEOUT_SECONDS",
                type "integer, 1 to 3600", check between(1, 3600);
            /// Most HTTP connections open at once; past it new ones wait, in order, until
            /// one closes. Keep it well under the process's open-file limit.
            max_connections: usize = 128;
                key "maxConnections", env "KLAW_MCP_MAX_CONNECTIONS",
                type "integer, 1 to 65536", check between(1, 65536);
            /// Most MCP sessions alive at once; past it `initialize` gets 503.
            max_sessions: usize = 128;
                key "maxSessions", env "KLAW_MCP_MAX_SESSIONS",
                type "integer, 1 to 65536", check between(1, 65536);
            /// Seconds a session may go without a request or notification before it ends
            /// (its client then gets 404 and initializes again).
            session_idle_seconds: u64 = 120;
                key "sessionIdleSeconds", env "KLAW_MCP_SESSION_IDLE_SECONDS",
                type "integer, 1 to 86400", check between(1, 86400);
        }
    }
}

section! {
    /// The `llm` section of `engine.json`: the model the agent talks to, and named
    /// models a subagent or a job may pick. Every key is optional.
    pub struct LlmSection {
        keys {
            /// Which API the model speaks: `openai` (OpenAI-compatible chat completions:
            /// OpenAI, Ollama, vLLM, llama.cpp, LM Studio, OpenRouter), `anthropic`, or
            /// `mcp-sampling` (the connected MCP client's model, through MCP sampling).
            provider: Provider = Provider::OpenAi;
                key "provider", env "KLAW_LLM_PROVIDER", type "`\"openai\"`, `\"anthropic\"` or `\"mcp-sampling\"`";
            /// With `mcp-sampling`: the MCP client (its `clientInfo.name` at `initialize`)
            /// whose model runs the work no MCP session started (a channel's turns,
            /// scheduled jobs). `null`: such work is never sampled through a client and
            /// fails saying so; work a session started is sampled only through that
            /// session.
            sampling_client: Option<String> = None;
                key "samplingClient", env "KLAW_LLM_SAMPLING_CLIENT", type "string or `null`";
            /// The API's base URL.
            base_url: Option<String> = None;
                key "baseUrl", env "KLAW_LLM_BASE_URL", type "string (URL) or `null`",
                shown "`https://api.openai.com/v1` (openai), `https://api.anthropic.com` (anthropic)",
                check http_url;
            /// The model's name at the provider (`gpt-4.1-mini`, `qwen2.5:7b`, ...);
            /// `chat` and `run` need one.
            model: Option<String> = None;
                key "model", env "KLAW_LLM_MODEL", type "string or `null`";
            /// The API key. Never printed (`config` shows `"***"`); when unset, the
            /// provider's usual variable is read (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`).
            api_key: Option<Secret> = None;
                key "apiKey", env "KLAW_LLM_API_KEY", type "string or `null`";
            /// How the model calls tools: `native` function calling, `text` (`TOOL:` /
            /// `TOOL_PARAMS:` in the reply) or `json` (the reply constrained to a tool
            /// call or an answer), for models without function calling.
            protocol: Protocol = Protocol::Native;
                key "protocol", env "KLAW_LLM_PROTOCOL", type "`\"native\"`, `\"text\"` or `\"json\"`";
            /// Time limit of one request, in seconds (for a streamed answer: between
            /// two pieces).
            timeout_seconds: u64 = 120;
                key "timeoutSeconds", env "KLAW_LLM_TIMEOUT_SECONDS", type "integer ≥ 1",
                check at_least(1);
            /// Time limit of connecting to the API, in seconds.
            connect_timeout_seconds: u64 = 10;
                key "connectTimeoutSeconds", env "KLAW_LLM_CONNECT_TIMEOUT_SECONDS",
                type "integer ≥ 1", check at_least(1);
            /// Retries of a request that got 429, a 5xx status or no connection (with
            /// backoff, honouring `Retry-After`).
            retries: u32 = 3;
                key "retries", env "KLAW_LLM_RETRIES", type "integer, 0 to 10",
                check at_most_10;
            /// Most tokens of one answer (`null`: the provider's default; Anthropic: 4096).
            max_tokens: Option<u32> = None;
                key "maxTokens", env "KLAW_LLM_MAX_TOKENS", type "integer ≥ 1, or `null`",
                check at_least_if_set(1);
            /// Sampling temperature (`null`: the provider's default); `0` makes a local
            /// model's answers repeatable.
            temperature: Option<f64> = None;
                key "temperature", env "KLAW_LLM_TEMPERATURE", type "number, 0 to 2, or `null`",
                check temperature_range;
            /// The tools the model is offered, by name (`null`: every tool). Small local
            /// models choose better among a few.
            tools: Option<Vec<String>> = None;
                key "tools", env "KLAW_LLM_TOOLS", type "array of tool names, or `null`",
                shown "`null` (every tool)";
            /// Named models: `{"small": {"model": "qwen2.5:3b", "protocol": "json"}}`.
            /// Each takes `provider`, `baseUrl`, `model`, `apiKey`, `protocol`, `tools`; what it
            /// leaves out comes from this section.
            models: std::collections::BTreeMap<String, NamedModel> = Default::default();
                key "models", type "object: name → model", check named_models;
        }
    }
}

section! {
    /// The `skills` section of `engine.json`: Agent Skills (`SKILL.md` folders in
    /// `<dataDir>/skills/` and `<workspace>/skills/`). Every key is optional.
    pub struct SkillsSection {
        keys {
            /// Most characters of skill names and descriptions in the agent's system
            /// prompt; past it the prompt says how many skills were left out and that
            /// `skill_list` shows them. 0 lists none.
            prompt_budget_chars: usize = 8000;
                key "promptBudgetChars", env "KLAW_SKILLS_PROMPT_BUDGET_CHARS",
                type "integer ≥ 0";
            /// Once a conversation has loaded a skill whose `allowed-tools` lists tools,
            /// refuse its calls of any other tool (the `skill_*` tools stay allowed).
            enforce_allowed_tools: bool = false;
                key "enforceAllowedTools", env "KLAW_SKILLS_ENFORCE_ALLOWED_TOOLS",
                type "`true` or `false`";
        }
    }
}

section! {
    /// The `agent` section of `engine.json`: how the agent loop runs. Every key is
    /// optional.
    pub struct AgentSection {
        keys {
            /// Which tool calls of the agent need a person's approval: `never`,
            /// `destructive` (tools marked destructive, and `approvalTools`) or `always`.
            /// In a terminal the user answers y/n; where nobody can answer, the call is
            /// refused with a reason the model reads.
            approval: Approval = Approval::Destructive;
                key "approval", env "KLAW_APPROVAL",
                type "`\"never\"`, `\"destructive\"` or `\"always\"`";
            /// More tools that need approval (unless `approval` is `never`), by name.
            approval_tools: Vec<String> = Vec::new();
                key "approvalTools", env "KLAW_APPROVAL_TOOLS", type "array of tool names";
            /// Most subagents running at once (`subagent_spawn`); more are refused.
            max_subagents: usize = 4;
                key "maxSubagents", env "KLAW_MAX_SUBAGENTS", type "integer ≥ 1",
                check at_least(1);
            /// Time limit of one subagent, in seconds.
            subagent_timeout_seconds: u64 = 600;
                key "subagentTimeoutSeconds", env "KLAW_SUBAGENT_TIMEOUT_SECONDS",
                type "integer ≥ 1", check at_least(1);
            /// How deep subagents may start subagents: 1 lets the agent start them and
            /// them not; 0 turns `subagent_spawn` off.
            max_subagent_depth: u32 = 1;
                key "maxSubagentDepth", env "KLAW_MAX_SUBAGENT_DEPTH", type "integer, 0 to 5",
                check depth_range;
            /// How many of a chat's last messages the model is sent.
            history_messages: usize = 200;
                key "historyMessages", env "KLAW_HISTORY_MESSAGES", type "integer ≥ 2",
                check at_least(2);
        }
    }
}

section! {
    /// The `gateway` section of `engine.json`: the channels `klaw-engine run` serves and
    /// the chats it may talk to. Every key is optional.
    pub struct GatewaySection {
        keys {
            /// The chats the agent may receive from and send to, as `<channel>_<id>`
            /// (`telegram_123456`); others get nothing and are logged. The console is
            /// always allowed.
            allowed_chat_ids: Vec<String> = Vec::new();
                key "allowedChatIds", env "KLAW_ALLOWED_CHAT_IDS",
                type "array of strings";
            /// The Telegram bot's token (from @BotFather); Telegram is served when it is
            /// set. Never printed (`config` shows `"***"`).
            telegram_token: Option<Secret> = None;
                key "telegramToken", env "KLAW_TELEGRAM_TOKEN", type "string or `null`";
            /// The Bot API's base URL (a Bot API server of your own, or a test server).
            telegram_base_url: String = "https://api.telegram.org".into();
                key "telegramBaseUrl", env "KLAW_TELEGRAM_BASE_URL", type "string (URL)",
                check gateway_url;
            /// How long one `getUpdates` long poll waits for messages, in seconds.
            telegram_poll_seconds: u64 = 30;
                key "telegramPollSeconds", env "KLAW_TELEGRAM_POLL_SECONDS",
                type "integer, 1 to 50", check poll_range;
        }
    }
}

section! {
    /// The `web` section of `engine.json`: what `web_fetch` and `web_search` may reach and
    /// how much they read. Every key is optional.
    pub struct WebSection {
        keys {
            /// `host:port` pairs `web_fetch` may reach although their addresses are
            /// private (`["127.0.0.1:8080"]`); every other private, loopback, link-local
            /// or metadata address is refused, however it is spelled or reached.
            allowed_private_hosts: Vec<String> = Vec::new();
                key "allowedPrivateHosts", env "KLAW_WEB_ALLOWED_PRIVATE_HOSTS",
                type "array of `host:port` strings", check host_ports;
            /// Most bytes read of one response body; the rest is cut (`truncated`).
            max_bytes: usize = WebSettings::default().max_bytes;
                key "maxBytes", env "KLAW_WEB_MAX_BYTES", type "integer ≥ 1",
                shown "`5242880` (5 MiB)", check at_least(1);
            /// Time limit of one request, body included, in seconds; for `web_fetch`, of
            /// the whole call (the request, the body and the page's extraction).
            timeout_seconds: u64 = WebSettings::default().timeout.as_secs();
                key "timeoutSeconds", env "KLAW_WEB_TIMEOUT_SECONDS",
                type "integer, 1 to 2^64−1", check at_least(1);
            /// The Brave Search API key for `web_search`; when unset, `BRAVE_API_KEY` is
            /// read. Never printed (`config` shows `"***"`).
            brave_api_key: Option<Secret> = None;
                key "braveApiKey", env "KLAW_BRAVE_API_KEY", type "string or `null`";
            /// The Brave Search endpoint.
            brave_endpoint: String = klaw_tools::tools::web::BRAVE_ENDPOINT.into();
                key "braveEndpoint", env "KLAW_BRAVE_ENDPOINT", type "string (URL)",
                check web_url;
            /// A SearXNG instance (`http://127.0.0.1:8888`, its JSON format enabled) that
            /// `web_search` asks when there is no Brave key.
            searxng_url: Option<String> = None;
                key "searxngUrl", env "KLAW_SEARXNG_URL", type "string (URL) or `null`",
                check searxng_url;
            /// The headless browser `render_js` runs (Chromium or Chrome); when unset, the
            /// first of `chromium-headless-shell`, `chrome-headless-shell`, `chromium`,
            /// `chromium-browser`, `google-chrome` on `PATH`. Without one, `render_js` is
            /// not offered.
            browser: Option<PathBuf> = None;
                key "browser", env "KLAW_BROWSER", type "string (path) or `null`",
                shown "found on `PATH`";
        }
    }
}

section! {
    /// The `scheduler` section of `engine.json`: how `klaw-engine run` fires the jobs of
    /// `schedule_add`. Every key is optional.
    pub struct SchedulerSection {
        keys {
            /// Whether `klaw-engine run` fires due jobs (with a model configured).
            enabled: bool = true;
                key "enabled", env "KLAW_SCHEDULER_ENABLED", type "`true` or `false`";
            /// How long an engine holds a run it claimed, in seconds; renewed while the
            /// run goes on. The run of an engine that died is settled by the job's misfire
            /// policy once this has passed.
            lease_seconds: u64 = 60;
                key "leaseSeconds", env "KLAW_SCHEDULER_LEASE_SECONDS", type "integer ≥ 3",
                check at_least(3);
            /// Time limit of one run (an agent turn), in seconds.
            run_timeout_seconds: u64 = 600;
                key "runTimeoutSeconds", env "KLAW_SCHEDULER_RUN_TIMEOUT_SECONDS",
                type "integer ≥ 1", check at_least(1);
            /// Most missed runs a job with misfire `all` catches up (the latest ones, one
            /// after another); older ones are recorded as skipped.
            max_catch_up_runs: u32 = 10;
                key "maxCatchUpRuns", env "KLAW_SCHEDULER_MAX_CATCH_UP_RUNS",
                type "integer, 1 to 1000", check between(1, 1000);
            /// Most jobs the schedule holds; adding one more is an error that names this
            /// cap. Each job has at most one run waiting or running at a time.
            max_jobs: u32 = 100;
                key "maxJobs", env "KLAW_SCHEDULER_MAX_JOBS", type "integer ≥ 1",
                check at_least(1);
            /// Whether unattended runs (scheduled runs, subagents) may add jobs and remove
            /// other jobs with `schedule_add` and `schedule_remove`; off, they are refused
            /// with a reason the model reads (a scheduled run may still remove its own
            /// job).
            unattended_changes: bool = false;
                key "unattendedChanges", env "KLAW_SCHEDULER_UNATTENDED_CHANGES",
                type "`true` or `false`";
        }
    }
}

section! {
    /// The `telemetry` section of `engine.json`: OpenTelemetry export of the engine's
    /// spans (agent turns, model requests, tool calls, MCP calls, scheduled runs) over
    /// OTLP/HTTP. Off unless an endpoint is known, here or in the standard `OTEL_*`
    /// variables. Every key is optional.
    pub struct TelemetrySection {
        keys {
            /// Whether spans are exported when an endpoint is known; `false` turns export
            /// off even when `OTEL_EXPORTER_OTLP_ENDPOINT` is set.
            enabled: bool = true;
                key "enabled", env "KLAW_TELEMETRY_ENABLED", type "`true` or `false`";
            /// The OTLP/HTTP endpoint (a collector, Jaeger, ...): a base such as
            /// `http://127.0.0.1:4318`, to which `/v1/traces` is added, or a URL that
            /// already ends with `/v1/traces`. When unset,
            /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, then `OTEL_EXPORTER_OTLP_ENDPOINT`.
            endpoint: Option<String> = None;
                key "endpoint", env "KLAW_TELEMETRY_ENDPOINT", type "string (URL) or `null`",
                shown "`OTEL_EXPORTER_OTLP_*`, else none (off)", check otlp_url;
            /// The `service.name` of the exported spans; when unset, `OTEL_SERVICE_NAME`,
            /// else `klaw-engine`.
            service_name: Option<String> = None;
                key "serviceName", env "KLAW_TELEMETRY_SERVICE_NAME",
                type "string or `null`", shown "`OTEL_SERVICE_NAME`, else `klaw-engine`";
            /// Headers sent with each export (`{"authorization": "Bearer ..."}`); when
            /// empty, `OTEL_EXPORTER_OTLP_HEADERS` (`k=v,k2=v2`). Never printed.
            headers: std::collections::BTreeMap<String, Secret> = Default::default();
                key "headers", type "object: name → string";
            /// The share of traces kept, 0 to 1 (a trace continued from an MCP client's
            /// `traceparent` follows the client's decision).
            sample_ratio: f64 = 1.0;
                key "sampleRatio", env "KLAW_TELEMETRY_SAMPLE_RATIO", type "number, 0 to 1",
                check ratio;
        }
    }
}

fn otlp_url(url: &Option<String>, _: &TelemetrySection) -> Result<(), String> {
    url.as_deref().map_or(Ok(()), http_or_https)
}

fn ratio(r: &f64, _: &TelemetrySection) -> Result<(), String> {
    if (0.0..=1.0).contains(r) {
        Ok(())
    } else {
        Err(format!("{r} is not between 0 and 1"))
    }
}

fn host_ports(hosts: &Vec<String>, _: &WebSection) -> Result<(), String> {
    for h in hosts {
        let port = h
            .rsplit_once(':')
            .map(|(host, port)| (host, port.parse::<u16>()));
        if !matches!(port, Some((host, Ok(_))) if !host.is_empty()) {
            return Err(format!("{h:?} is not host:port (e.g. \"127.0.0.1:8080\")"));
        }
    }
    Ok(())
}

#[allow(clippy::ptr_arg)] // a key's check takes the field's own type
fn web_url(url: &String, _: &WebSection) -> Result<(), String> {
    http_or_https(url)
}

fn searxng_url(url: &Option<String>, _: &WebSection) -> Result<(), String> {
    url.as_deref().map_or(Ok(()), http_or_https)
}

fn depth_range(n: &u32, _: &AgentSection) -> Result<(), String> {
    if *n > 5 {
        return Err(format!("{n} is more than 5"));
    }
    Ok(())
}

/// An `http://` or `https://` URL (the checks of the URL keys share it).
fn http_or_https(url: &str) -> Result<(), String> {
    if url.starts_with("http://") || url.starts_with("https://") {
        Ok(())
    } else {
        Err(format!("{url:?} is not an http:// or https:// URL"))
    }
}

#[allow(clippy::ptr_arg)] // a key's check takes the field's own type
fn gateway_url(url: &String, _: &GatewaySection) -> Result<(), String> {
    http_or_https(url)
}

fn poll_range(n: &u64, _: &GatewaySection) -> Result<(), String> {
    if (1..=50).contains(n) {
        Ok(())
    } else {
        Err(format!("{n} is not between 1 and 50"))
    }
}

/// A token or key from the configuration: read like a string, but shown as `***` by
/// `Debug` and when serialized (`klaw-engine config`); [`Secret::expose`] gives it to the
/// one place that sends it.
#[derive(Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// A secret holding `value`.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself, to send where it belongs.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("\"***\"")
    }
}

impl serde::Serialize for Secret {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str("***")
    }
}

/// `memory.model`: one model (a name or a directory path), or several, the first
/// leading. Read from a string or an array of strings; written as a string when there is
/// one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryModels(Vec<String>);

impl MemoryModels {
    /// The models, as written, the first leading.
    pub fn names(&self) -> &[String] {
        &self.0
    }

    /// The first (leading) model.
    pub fn first(&self) -> &str {
        self.0.first().map_or(DEFAULT_MEMORY_MODEL, String::as_str)
    }
}

impl From<&str> for MemoryModels {
    fn from(name: &str) -> Self {
        Self(vec![name.to_owned()])
    }
}

impl From<Vec<String>> for MemoryModels {
    fn from(names: Vec<String>) -> Self {
        Self(names)
    }
}

impl serde::Serialize for MemoryModels {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0.as_slice() {
            [one] => s.serialize_str(one),
            many => many.serialize(s),
        }
    }
}

impl<'de> serde::Deserialize<'de> for MemoryModels {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(untagged, expecting = "a model name or path, or an array of them")]
        enum OneOrMany {
            One(String),
            Many(Vec<String>),
        }
        Ok(match OneOrMany::deserialize(d)? {
            OneOrMany::One(m) => Self(vec![m]),
            OneOrMany::Many(ms) => Self(ms),
        })
    }
}

/// One of `llm.models`: what differs from the `llm` section.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NamedModel {
    /// The API it speaks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<Provider>,
    /// The API's base URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The model's name at the provider.
    pub model: String,
    /// The API key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<Secret>,
    /// How it calls tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<Protocol>,
    /// The tools it is offered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
}

fn http_url(url: &Option<String>, _: &LlmSection) -> Result<(), String> {
    url.as_deref().map_or(Ok(()), http_or_https)
}

fn temperature_range(t: &Option<f64>, _: &LlmSection) -> Result<(), String> {
    match t {
        Some(t) if !(0.0..=2.0).contains(t) => Err(format!("{t} is not between 0 and 2")),
        _ => Ok(()),
    }
}

fn at_most_10(n: &u32, _: &LlmSection) -> Result<(), String> {
    if *n > 10 {
        return Err(format!("{n} is more than 10"));
    }
    Ok(())
}

fn named_models(
    models: &std::collections::BTreeMap<String, NamedModel>,
    _: &LlmSection,
) -> Result<(), String> {
    for (name, m) in models {
        if m.model.trim().is_empty() {
            return Err(format!("`{name}`: `model` is empty"));
        }
        if let Some(u) = &m.base_url
            && !(u.starts_with("http://") || u.starts_with("https://"))
        {
            return Err(format!("`{name}`: {u:?} is not an http:// or https:// URL"));
        }
    }
    Ok(())
}

/// `mcp.bind`: a socket address (`127.0.0.1:8765`, `[::1]:8765`, `0.0.0.0:80`).
fn valid_bind(bind: &str, _: &McpSection) -> Result<(), String> {
    bind.parse::<std::net::SocketAddr>()
        .map(|_| ())
        .map_err(|_| format!("{bind:?} is not an address and port such as 127.0.0.1:8765"))
}

/// `mcp.token`: long enough not to be guessed.
fn token_long_enough(token: &Option<Secret>, _: &McpSection) -> Result<(), String> {
    match token {
        Some(t) if t.expose().chars().count() < 16 => {
            Err("must be at least 16 characters (e.g. `openssl rand -hex 24`)".into())
        }
        _ => Ok(()),
    }
}

section! {
    /// `memory.weights`: how much each side of a hybrid search counts.
    pub struct MemoryWeights {
        keys {
            /// Weight of the full-text side in a hybrid search: its word evidence (at most
            /// the model's lift: 0.5, e5's 0.1, `hybrid_lift` in its `klaw-model.json`) is
            /// added to the cosine times this.
            text: f64 = 1.0;
                key "text", env "KLAW_MEMORY_TEXT_WEIGHT", type "number > 0",
                check positive_weight;
            /// Weight of the vector side in a hybrid search: the cosine is multiplied by it.
            vector: f64 = 1.0;
                key "vector", env "KLAW_MEMORY_VECTOR_WEIGHT", type "number > 0",
                check positive_weight;
        }
    }
}

impl Copy for MemoryWeights {}

/// `execTimeoutSeconds`: at least 1 and at most `execMaxTimeoutSeconds` (when that is
/// valid: a maximum of 0 is reported under its own key).
fn within_max_timeout(v: &u64, c: &EngineConfig) -> Result<(), String> {
    at_least(1)(v, c)?;
    if c.exec_max_timeout_seconds >= 1 && *v > c.exec_max_timeout_seconds {
        return Err(format!(
            "{v} is above execMaxTimeoutSeconds ({})",
            c.exec_max_timeout_seconds
        ));
    }
    Ok(())
}

/// `logLevel`: a level name, or `tracing` directives (`target=level`, comma-separated).
fn valid_log_filter(filter: &str, _: &EngineConfig) -> Result<(), String> {
    const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];
    let valid = !filter.trim().is_empty()
        && filter.split(',').all(|d| {
            let level = d.rsplit('=').next().unwrap_or(d).trim();
            LEVELS.contains(&level.to_ascii_lowercase().as_str())
        })
        && tracing_subscriber::EnvFilter::try_new(filter).is_ok();
    if valid {
        Ok(())
    } else {
        Err(format!(
            "{filter:?} is not a log filter; use error, warn, info, debug or trace"
        ))
    }
}

/// `memory.model`: at least one model, none empty, none twice.
fn model_named(models: &MemoryModels, _: &MemorySection) -> Result<(), String> {
    let names = models.names();
    if names.is_empty() || names.iter().any(|m| m.trim().is_empty()) {
        return Err(
            "must name a model (such as use-multilingual-v3 or multilingual-e5-small) \
                    or a model directory, or a list of them"
                .into(),
        );
    }
    for (i, m) in names.iter().enumerate() {
        if names[..i].iter().any(|x| x.trim() == m.trim()) {
            return Err(format!(
                "lists {m:?} twice: each model is one vector space, list it once"
            ));
        }
    }
    Ok(())
}

/// `memory.chunkOverlap`: less than half of `memory.chunkTokens`.
fn overlap_below_half(overlap: &usize, m: &MemorySection) -> Result<(), String> {
    if *overlap >= m.chunk_tokens / 2 {
        return Err(format!(
            "{overlap} must be less than half of memory.chunkTokens ({})",
            m.chunk_tokens
        ));
    }
    Ok(())
}

/// A weight of hybrid search: finite and above 0.
fn positive_weight(w: &f64, _: &MemoryWeights) -> Result<(), String> {
    if w.is_finite() && *w > 0.0 {
        Ok(())
    } else {
        Err(format!(
            "{w} must be a number greater than 0 (to search one side only, use the search \
             mode `text` or `vector`)"
        ))
    }
}

impl EngineConfig {
    /// Every key of `engine.json` (and its sections), documented: the tables of
    /// `doc/config/engine-json.md` and `klaw-engine config --keys`.
    pub fn keys() -> Vec<KeyDoc> {
        let mut out = Vec::new();
        <Self as Section>::keys("", &mut out);
        out
    }
}

/// Why the configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file exists but cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The config file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is not valid JSON, or has an unknown key or a value of the wrong type.
    #[error("{path}: {message}")]
    Parse {
        /// The config file.
        path: PathBuf,
        /// serde's message, with line and column.
        message: String,
    },
    /// `KLAW_CONFIG` names a file that does not exist.
    #[error("KLAW_CONFIG points to {0}, which does not exist")]
    Missing(PathBuf),
    /// A `KLAW_*` variable has a value of the wrong type.
    #[error("environment variable {var}={value:?}: {message}")]
    Env {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What was expected.
        message: String,
    },
    /// A key has a value outside its range.
    #[error("{key}{}: {message}", var.map(|v| format!(" (set by {v})")).unwrap_or_default())]
    Invalid {
        /// The key, as in engine.json (`memory.threads`).
        key: String,
        /// The environment variable that set the value, if one did.
        var: Option<&'static str>,
        /// What is wrong.
        message: String,
    },
    /// Neither `HOME` nor the XDG variables are set, so no default directory exists.
    #[error("cannot find a default for {0}: HOME is not set; set {1}")]
    NoHome(&'static str, &'static str),
    /// The config file (or, when there is none, the place it is looked for) is inside the
    /// workspace, where commands could read its secrets and rewrite it.
    #[error(
        "{} {} is inside the workspace {}: commands run in the workspace could read its \
         secrets (llm.apiKey, mcp.token, gateway.telegramToken) and {} it, e.g. to turn the \
         sandbox off for the next start. Move the config file out of the workspace (name it \
         with KLAW_CONFIG; the default is $XDG_CONFIG_HOME/klaw/engine.json), or point the \
         workspace elsewhere (`workspace` in engine.json, or KLAW_WORKSPACE)",
        if *.exists { "the config file" } else { "the config file's default path (no file there yet)" },
        .config.display(),
        .workspace.display(),
        if *.exists { "rewrite" } else { "create" }
    )]
    ConfigInWorkspace {
        /// The config file, as named.
        config: PathBuf,
        /// The workspace, as configured.
        workspace: PathBuf,
        /// Whether the file exists (else built-in defaults are in use).
        exists: bool,
    },
    /// What the engine loads and runs outside the sandbox (the ONNX Runtime library, the
    /// embedding model) is inside the workspace, where a command could replace it.
    #[error(
        "{key} {} is inside the workspace {}: the engine loads it itself, outside the \
         sandbox, so a command run in the workspace could replace it and have its code \
         run as the engine at the next start. Keep it outside the workspace (the default \
         is under ~/.cache/klaw), or point the workspace elsewhere",
        .path.display(),
        .workspace.display()
    )]
    LoadedFromWorkspace {
        /// The key that names it.
        key: &'static str,
        /// The file or directory, resolved.
        path: PathBuf,
        /// The workspace, as configured.
        workspace: PathBuf,
    },
}

/// Where the configuration came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    /// A file that exists.
    File(PathBuf),
    /// No file at the default path: built-in defaults.
    Defaults(PathBuf),
}

/// A loaded, checked configuration with every directory resolved.
#[derive(Debug, Clone)]
pub struct Config {
    /// The keys as read (after environment overrides).
    pub raw: EngineConfig,
    /// Where they were read from.
    pub source: ConfigSource,
    /// The workspace directory.
    pub workspace: PathBuf,
    /// The data directory.
    pub data_dir: PathBuf,
    /// The time zone.
    pub timezone: String,
    /// The embedding model's directory (`memory.model` resolved, its first model); `None`
    /// when it is a name and there is no cache directory (neither `KLAW_CACHE` nor
    /// `HOME`).
    pub memory_model_dir: Option<PathBuf>,
    /// The directories of `memory.model`'s other models, when it lists several (names
    /// without a cache directory left out, as above).
    pub memory_more_model_dirs: Vec<PathBuf>,
    /// The ONNX Runtime library (`memory.runtimeLibrary` resolved); `None` as above.
    pub memory_runtime_library: Option<PathBuf>,
    /// ONNX Runtime intra-op threads (`memory.threads`, else one per core).
    pub memory_threads: usize,
    /// The providers' usual key variables, read here with every other variable.
    pub provider_keys: ProviderKeys,
}

/// The API keys in the providers' usual variables (`OPENAI_API_KEY`,
/// `ANTHROPIC_API_KEY`), read when the configuration is; a client sends one only to its
/// provider's own server.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProviderKeys {
    openai: Option<Secret>,
    anthropic: Option<Secret>,
    brave: Option<Secret>,
}

impl ProviderKeys {
    /// Reads each provider's variable from `env` (an empty one is none).
    pub fn from_env(env: Env<'_>) -> Self {
        let read = |p: Provider| {
            env(p.key_variable())
                .filter(|k| !k.trim().is_empty())
                .map(Secret::new)
        };
        Self {
            openai: read(Provider::OpenAi),
            anthropic: read(Provider::Anthropic),
            brave: env("BRAVE_API_KEY")
                .filter(|k| !k.trim().is_empty())
                .map(Secret::new),
        }
    }

    /// The Brave Search key in `BRAVE_API_KEY`.
    pub fn brave(&self) -> Option<&Secret> {
        self.brave.as_ref()
    }

    /// The key in `provider`'s variable.
    pub fn get(&self, provider: Provider) -> Option<&Secret> {
        match provider {
            Provider::OpenAi => self.openai.as_ref(),
            Provider::Anthropic => self.anthropic.as_ref(),
            Provider::McpSampling => None,
        }
    }
}

/// Process environment lookup, replaceable in tests.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// Reads the real process environment.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

impl Config {
    /// Loads the configuration from `KLAW_CONFIG` or `$XDG_CONFIG_HOME/klaw/engine.json`
    /// and applies the `KLAW_*` overrides.
    pub fn load() -> Result<Self, ConfigError> {
        Self::load_with(&process_env)
    }

    /// [`Config::load`] with an explicit environment.
    pub fn load_with(env: Env<'_>) -> Result<Self, ConfigError> {
        let (path, explicit) = match env("KLAW_CONFIG") {
            // Absolute, so that paths in the file are relative to its real folder.
            Some(p) => (absolute(Path::new(&p)), true),
            None => (
                xdg(
                    env,
                    "XDG_CONFIG_HOME",
                    ".config",
                    "the config file",
                    "KLAW_CONFIG",
                )?
                .join("klaw/engine.json"),
                false,
            ),
        };
        let (raw, source) = match std::fs::read_to_string(&path) {
            Ok(text) => (parse(&path, &text)?, ConfigSource::File(path)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if explicit {
                    return Err(ConfigError::Missing(path));
                }
                (EngineConfig::default(), ConfigSource::Defaults(path))
            }
            Err(source) => return Err(ConfigError::Read { path, source }),
        };
        Self::resolve(raw, source, env)
    }

    /// Applies overrides, fills defaults and checks ranges.
    pub fn resolve(
        mut raw: EngineConfig,
        source: ConfigSource,
        env: Env<'_>,
    ) -> Result<Self, ConfigError> {
        raw.apply_env(env)?;
        raw.check("", env)?;
        let base = match &source {
            ConfigSource::File(f) => f.parent().map(Path::to_path_buf),
            ConfigSource::Defaults(_) => None,
        };
        let dir = |p: &Path, var: &str| -> PathBuf {
            // A path from the environment is relative to the current directory; one
            // from the file is relative to the file.
            let from_env = env(var).is_some();
            let p = expand_home(p, env);
            match (&base, from_env || p.is_absolute()) {
                (Some(b), false) => b.join(p),
                _ => absolute(&p),
            }
        };
        let data_dir = match &raw.data_dir {
            Some(d) => dir(d, "KLAW_DATA"),
            None => xdg(env, "XDG_DATA_HOME", ".local/share", "dataDir", "KLAW_DATA")?.join("klaw"),
        };
        let workspace = match &raw.workspace {
            Some(w) => dir(w, "KLAW_WORKSPACE"),
            None => data_dir.join("workspace"),
        };
        check_data_dir_outside(&data_dir, &workspace, env)?;
        check_config_outside(&source, &workspace)?;
        let timezone = match &raw.timezone {
            Some(tz) => match klaw_tools::tools::utilities::time_zone(tz) {
                Ok(zone) => zone.iana_name().unwrap_or(tz).to_owned(),
                Err(e) if env("KLAW_TIMEZONE").is_some() => {
                    return Err(ConfigError::Env {
                        var: "KLAW_TIMEZONE",
                        value: tz.clone(),
                        message: e.message().to_owned(),
                    });
                }
                Err(e) => return Err(invalid("timezone", e.message())),
            },
            None => system_timezone(env),
        };
        let cache = klaw_tools::cache_dir_from(env);
        let m = &raw.memory;
        let model_dir = |model: &str| {
            if is_path(model) {
                Some(dir(Path::new(model), "KLAW_MEMORY_MODEL"))
            } else {
                cache.as_ref().map(|c| c.join("models").join(model))
            }
        };
        let memory_model_dir = model_dir(m.model.first().trim());
        let memory_more_model_dirs: Vec<PathBuf> = m
            .model
            .names()
            .iter()
            .skip(1)
            .filter_map(|n| model_dir(n.trim()))
            .collect();
        let memory_runtime_library = match &m.runtime_library {
            Some(lib) => Some(dir(lib, "KLAW_MEMORY_RUNTIME_LIBRARY")),
            None => cache
                .as_ref()
                .map(|c| c.join("onnxruntime").join(DEFAULT_RUNTIME_LIBRARY)),
        };
        check_loaded_outside(
            [
                ("memory.runtimeLibrary", memory_runtime_library.as_deref()),
                ("memory.model", memory_model_dir.as_deref()),
            ],
            &workspace,
        )?;
        for d in &memory_more_model_dirs {
            check_loaded_outside(
                [("memory.model", Some(d)), ("memory.model", None)],
                &workspace,
            )?;
        }
        let memory_threads = m
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        Ok(Config {
            raw,
            source,
            workspace,
            data_dir,
            timezone,
            memory_model_dir,
            memory_more_model_dirs,
            memory_runtime_library,
            memory_threads,
            provider_keys: ProviderKeys::from_env(env),
        })
    }

    /// The limits tools run with.
    pub fn limits(&self) -> Limits {
        let r = &self.raw;
        let mut l = Limits::default();
        l.max_file_size_bytes = r.max_file_size_bytes;
        l.tool_timeout = Duration::from_secs(r.tool_timeout_seconds);
        l.max_read_bytes = r.max_read_bytes;
        l
    }

    /// The shell tools' settings; the engine registers them as a service.
    pub fn shell(&self) -> ShellSettings {
        let r = &self.raw;
        ShellSettings::default()
            .with_timeouts(
                Duration::from_secs(r.exec_timeout_seconds),
                Duration::from_secs(r.exec_max_timeout_seconds),
            )
            .with_max_output_bytes(r.exec_max_output_bytes)
            .with_max_processes(r.max_processes)
            .with_sandbox(r.sandbox)
            .with_network(r.network)
    }

    /// The web tools' settings; the engine registers them as a service.
    pub fn web(&self) -> WebSettings {
        let w = &self.raw.web;
        let mut settings = WebSettings::default()
            .with_limits(w.max_bytes, Duration::from_secs(w.timeout_seconds))
            .with_search(
                w.brave_api_key
                    .as_ref()
                    .or(self.provider_keys.brave())
                    .map(|k| k.expose().to_owned()),
                w.brave_endpoint.clone(),
                w.searxng_url.clone(),
            );
        for host in &w.allowed_private_hosts {
            settings = settings.allow_private(host.clone());
        }
        settings
    }

    /// The browser `render_js` runs: `web.browser`, else one found on `PATH`.
    #[cfg(feature = "render")]
    pub fn browser(&self) -> Option<PathBuf> {
        klaw_tools::tools::web::find_browser(self.raw.web.browser.as_deref())
    }

    /// The file tools' settings; the engine registers them as a service.
    pub fn files(&self) -> FilesSettings {
        FilesSettings::default().with_max_list_entries(self.raw.max_list_entries)
    }

    /// The skills group's settings; the engine registers them as a service.
    #[cfg(feature = "skills")]
    pub fn skills(&self) -> klaw_tools::tools::skills::SkillsSettings {
        klaw_tools::tools::skills::SkillsSettings::default()
            .with_prompt_budget_chars(self.raw.skills.prompt_budget_chars)
            .with_enforce_allowed_tools(self.raw.skills.enforce_allowed_tools)
    }

    /// The settings tools see.
    pub fn settings(&self) -> Settings {
        Settings::new(self.timezone.clone(), self.raw.language)
    }

    /// The effective configuration as JSON: every key, with directories resolved (and
    /// the memory runtime library and thread count).
    pub fn effective(&self) -> serde_json::Value {
        let mut raw = self.raw.clone();
        raw.workspace = Some(self.workspace.clone());
        raw.data_dir = Some(self.data_dir.clone());
        raw.timezone = Some(self.timezone.clone());
        raw.memory.runtime_library = self.memory_runtime_library.clone();
        raw.memory.threads = Some(self.memory_threads);
        // Secrets (tokens, keys) serialize as `"***"`: they never leave through
        // `klaw-engine config`.
        serde_json::to_value(raw).unwrap_or_default()
    }

    /// What the memory tools run with; the engine registers it as a service.
    #[cfg(feature = "memory")]
    pub fn memory(&self) -> klaw_tools::tools::memory::MemoryConfig {
        use klaw_tools::tools::memory::{ChunkOptions, Weights};
        let m = &self.raw.memory;
        klaw_tools::tools::memory::MemoryConfig {
            model_dir: self.memory_model_dir.clone(),
            more_model_dirs: self.memory_more_model_dirs.clone(),
            runtime_library: self.memory_runtime_library.clone(),
            threads: Some(self.memory_threads),
            weights: Weights {
                text: m.weights.text,
                vector: m.weights.vector,
            },
            chunk: ChunkOptions {
                max_tokens: m.chunk_tokens,
                overlap_tokens: m.chunk_overlap,
            },
        }
    }
}

/// Parses engine.json text; errors carry line and column.
pub fn parse(path: &Path, text: &str) -> Result<EngineConfig, ConfigError> {
    if !text.trim_start().starts_with('{') {
        return Err(ConfigError::Parse {
            path: path.to_path_buf(),
            message: "engine.json must be a JSON object: { \"key\": value, ... }".into(),
        });
    }
    serde_json::from_str(text).map_err(|e| ConfigError::Parse {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// A `memory.model` that is a path rather than a name under `<cache>/models/`.
fn is_path(model: &str) -> bool {
    model.contains('/') || model.starts_with('~') || model.starts_with('.')
}

fn invalid(key: &str, message: &str) -> ConfigError {
    ConfigError::Invalid {
        key: key.to_owned(),
        var: None,
        message: message.to_owned(),
    }
}

/// Refuses a data dir inside (or equal to) the workspace: commands may rename, replace
/// or read anything in the workspace, so no mount or rule could keep the data dir (the
/// memory database, core memory, secrets) out of their reach. The default layout, the
/// workspace inside the data dir, is fine. Checked on the paths as given and, where
/// both exist, on the real ones (symlinks resolved).
fn check_data_dir_outside(
    data_dir: &Path,
    workspace: &Path,
    env: Env<'_>,
) -> Result<(), ConfigError> {
    // `..` taken lexically first: `/w/../d` is not inside `/w`.
    let nested = |d: &Path, w: &Path| lexical(d).starts_with(lexical(w));
    let real = std::fs::canonicalize(data_dir)
        .ok()
        .zip(std::fs::canonicalize(workspace).ok());
    if nested(data_dir, workspace) || real.is_some_and(|(d, w)| nested(&d, &w)) {
        return Err(ConfigError::Invalid {
            key: "dataDir".into(),
            // The variable that placed one inside the other, if any.
            var: ["KLAW_DATA", "KLAW_WORKSPACE"]
                .into_iter()
                .find(|v| env(v).is_some()),
            message: format!(
                "the data dir {} is inside the workspace {}: shell commands can reach \
                 everything in the workspace, so keep the data dir outside it (the default \
                 puts the workspace inside the data dir)",
                data_dir.display(),
                workspace.display()
            ),
        });
    }
    Ok(())
}

/// Refuses a config file inside (or equal to a file in) the workspace: a command run
/// there could read its secrets and rewrite it, the sandbox switch included, for the next
/// start. The default path is refused too when it lies in the workspace, though no file
/// is there yet: a command could create one. Checked on the paths as given and on the
/// real ones (symlinks resolved, through the longest part that exists), so neither `..`
/// nor a link in either path dodges it.
fn check_config_outside(source: &ConfigSource, workspace: &Path) -> Result<(), ConfigError> {
    let (config, exists) = match source {
        ConfigSource::File(p) => (p, true),
        ConfigSource::Defaults(p) => (p, false),
    };
    if is_inside(config, workspace) {
        return Err(ConfigError::ConfigInWorkspace {
            config: config.clone(),
            workspace: workspace.to_path_buf(),
            exists,
        });
    }
    Ok(())
}

/// Whether `path` is `dir` or beneath it, on the paths as given and on the real ones
/// (symlinks resolved through the longest part that exists), so that neither `..` nor a
/// link in either path dodges the answer.
fn is_inside(path: &Path, dir: &Path) -> bool {
    let inside = |p: &Path, d: &Path| lexical(p).starts_with(lexical(d));
    let (p, d) = (absolute(path), absolute(dir));
    inside(&p, &d) || inside(&real(&p), &real(&d))
}

/// Refuses an ONNX Runtime library or an embedding model inside the workspace: the
/// engine loads them outside the sandbox.
fn check_loaded_outside(
    loaded: [(&'static str, Option<&Path>); 2],
    workspace: &Path,
) -> Result<(), ConfigError> {
    for (key, path) in loaded {
        if let Some(path) = path.filter(|p| is_inside(p, workspace)) {
            return Err(ConfigError::LoadedFromWorkspace {
                key,
                path: path.to_path_buf(),
                workspace: workspace.to_path_buf(),
            });
        }
    }
    Ok(())
}

/// `path` with every symlink resolved: the longest leading part that exists made
/// canonical, the rest appended as written.
fn real(path: &Path) -> PathBuf {
    let mut base = path.to_path_buf();
    let mut rest = Vec::new();
    loop {
        if let Ok(mut out) = std::fs::canonicalize(&base) {
            out.extend(rest.iter().rev());
            return lexical(&out);
        }
        match (
            base.file_name().map(std::ffi::OsStr::to_owned),
            base.parent(),
        ) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                base = parent.to_path_buf();
            }
            _ => return lexical(path),
        }
    }
}

/// `path` with `.` dropped and each `..` removing the component before it.
fn lexical(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// `~` and `~/x` become the home directory.
fn expand_home(p: &Path, env: Env<'_>) -> PathBuf {
    let Some(home) = env("HOME") else {
        return p.to_path_buf();
    };
    match p.strip_prefix("~") {
        Ok(rest) => PathBuf::from(home).join(rest),
        Err(_) => p.to_path_buf(),
    }
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

fn xdg(
    env: Env<'_>,
    var: &str,
    fallback: &str,
    what: &'static str,
    klaw_var: &'static str,
) -> Result<PathBuf, ConfigError> {
    if let Some(dir) = env(var).map(PathBuf::from).filter(|p| p.is_absolute()) {
        return Ok(dir);
    }
    match env("HOME") {
        Some(home) => Ok(PathBuf::from(home).join(fallback)),
        None => Err(ConfigError::NoHome(what, klaw_var)),
    }
}

fn system_timezone(env: Env<'_>) -> String {
    if let Some(tz) = env("TZ") {
        let tz = tz.trim_start_matches(':');
        if let Ok(zone) = klaw_tools::tools::utilities::time_zone(tz) {
            return zone.iana_name().unwrap_or(tz).to_owned();
        }
    }
    localtime_link_name()
        .or_else(|| {
            jiff::tz::TimeZone::try_system()
                .ok()
                .and_then(|z| z.iana_name().map(str::to_owned))
        })
        .unwrap_or_else(|| "UTC".into())
}

/// The zone `/etc/localtime` names when it is a link into a zoneinfo directory (its
/// usual form: `/usr/share/zoneinfo/Europe/Moscow`), as spelled in the time zones
/// compiled into the engine; `None` for anything else.
///
/// The same reading of the link as `jiff::tz::TimeZone::try_system`, without its
/// database of the system's zones, which lists the whole zoneinfo directory (some 600
/// files in 22 directories) on first use: every start of the engine paid for that scan.
fn localtime_link_name() -> Option<String> {
    const LOCALTIME: &str = "/etc/localtime";
    let target = std::fs::read_link(LOCALTIME).ok()?;
    // A link to nothing is not a zone (`try_system` falls back to UTC then too).
    std::fs::metadata(LOCALTIME).ok()?;
    let target = target.to_str()?;
    let name = &target[target.rfind("zoneinfo/")? + "zoneinfo/".len()..];
    let zone = jiff::tz::TimeZoneDatabase::bundled().get(name).ok()?;
    zone.iana_name().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn resolve_defaults(env: Env<'_>) -> Result<Config, ConfigError> {
        Config::resolve(
            EngineConfig::default(),
            ConfigSource::Defaults("x".into()),
            env,
        )
    }

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn defaults_follow_xdg() {
        let e = env(&[("HOME", "/home/u"), ("TZ", "Europe/Moscow")]);
        let c = resolve_defaults(&e).unwrap();
        assert_eq!(c.data_dir, PathBuf::from("/home/u/.local/share/klaw"));
        assert_eq!(
            c.workspace,
            PathBuf::from("/home/u/.local/share/klaw/workspace")
        );
        assert_eq!(c.timezone, "Europe/Moscow");
        assert_eq!(c.raw.max_file_size_bytes, 1_048_576);
        assert_eq!(c.raw.max_tool_call_rounds, 10);
    }

    #[test]
    fn env_overrides_the_file() {
        let e = env(&[
            ("HOME", "/h"),
            ("KLAW_WORKSPACE", "/ws"),
            ("KLAW_DATA", "/data"),
            ("KLAW_MAX_FILE_SIZE_BYTES", "10"),
            ("KLAW_LANGUAGE", "en"),
        ]);
        let raw = parse(
            Path::new("e.json"),
            r#"{"workspace": "/other", "maxFileSizeBytes": 5}"#,
        )
        .unwrap();
        let c = Config::resolve(raw, ConfigSource::File("e.json".into()), &e).unwrap();
        assert_eq!(c.workspace, PathBuf::from("/ws"));
        assert_eq!(c.data_dir, PathBuf::from("/data"));
        assert_eq!(c.raw.max_file_size_bytes, 10);
        assert_eq!(c.raw.language, Lang::En);
    }

    #[test]
    fn every_limit_has_a_variable() {
        let e = env(&[
            ("HOME", "/h"),
            ("KLAW_MAX_READ_BYTES", "7"),
            ("KLAW_MAX_LIST_ENTRIES", "8"),
            ("KLAW_EXEC_TIMEOUT_SECONDS", "9"),
            ("KLAW_EXEC_MAX_TIMEOUT_SECONDS", "10"),
            ("KLAW_EXEC_MAX_OUTPUT_BYTES", "11"),
            ("KLAW_MAX_PROCESSES", "12"),
            ("KLAW_SANDBOX", "off"),
            ("KLAW_NETWORK", "true"),
        ]);
        let c = resolve_defaults(&e).unwrap();
        assert_eq!(c.limits().max_read_bytes, 7);
        assert_eq!(c.files().max_list_entries, 8);
        let s = c.shell();
        assert_eq!(s.timeout, Duration::from_secs(9));
        assert_eq!(s.max_timeout, Duration::from_secs(10));
        assert_eq!((s.max_output_bytes, s.max_processes), (11, 12));
        assert_eq!(s.sandbox, SandboxMode::Off);
        assert!(s.network);
        let e = env(&[("HOME", "/h"), ("KLAW_SANDBOX", "docker")]);
        let err = resolve_defaults(&e).unwrap_err();
        assert!(
            err.to_string().contains("unknown sandbox `docker`"),
            "{err}"
        );
    }

    #[test]
    fn unknown_key_is_named() {
        let e = parse(Path::new("e.json"), "{\n  \"maxFileSize\": 1\n}")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown field `maxFileSize`"), "{e}");
        assert!(e.contains("line 2"), "{e}");
    }

    #[test]
    fn broken_json_has_line_and_column() {
        let e = parse(Path::new("e.json"), "{\n  \"timezone\": \"UTC\",\n}")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 3 column 1"), "{e}");
    }

    #[test]
    fn bad_values_name_the_key_or_variable() {
        let e = env(&[("HOME", "/h"), ("KLAW_MAX_TOOL_CALL_ROUNDS", "many")]);
        let err = resolve_defaults(&e).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("environment variable KLAW_MAX_TOOL_CALL_ROUNDS=\"many\""),
            "{err}"
        );
        let raw = parse(Path::new("e.json"), r#"{"timezone": "Mars/Olympus"}"#).unwrap();
        let err = Config::resolve(
            raw,
            ConfigSource::Defaults("x".into()),
            &env(&[("HOME", "/h")]),
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("timezone: unknown time zone `Mars/Olympus`"),
            "{err}"
        );
        let raw = parse(Path::new("e.json"), r#"{"maxToolCallRounds": 0}"#).unwrap();
        let err = Config::resolve(
            raw,
            ConfigSource::Defaults("x".into()),
            &env(&[("HOME", "/h")]),
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "maxToolCallRounds: must be at least 1");
    }

    /// A data dir inside the workspace is a configuration error (issue 13: a command
    /// renamed a parent directory and read the data dir), by name or through a symlink;
    /// the default layout (the workspace inside the data dir) is fine.
    #[test]
    fn a_data_dir_inside_the_workspace_is_refused() {
        let resolve = |json: &str| {
            let raw = parse(Path::new("/etc/klaw/engine.json"), json).unwrap();
            Config::resolve(
                raw,
                ConfigSource::File("/etc/klaw/engine.json".into()),
                &env(&[("HOME", "/home/u")]),
            )
        };
        for json in [
            r#"{"workspace": "/w", "dataDir": "/w/sub/data"}"#,
            r#"{"workspace": "/w", "dataDir": "/w"}"#,
        ] {
            let err = resolve(json).unwrap_err();
            assert!(
                err.to_string().starts_with("dataDir: the data dir /w"),
                "{json}: {err}"
            );
        }
        resolve(r#"{"dataDir": "/d"}"#).unwrap();
        resolve(r#"{"workspace": "/w", "dataDir": "/w/../d"}"#).unwrap();
        resolve(r#"{"workspace": "/x/../w", "dataDir": "/w/./data"}"#).unwrap_err();
        resolve(r#"{"workspace": "/w", "dataDir": "/w-data"}"#).unwrap();
        // Through a symlink: the workspace is a link to a directory holding the data dir.
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir_all(real.join("data")).unwrap();
        std::os::unix::fs::symlink(&real, dir.path().join("ws")).unwrap();
        let json = serde_json::json!({
            "workspace": dir.path().join("ws"),
            "dataDir": real.join("data"),
        })
        .to_string();
        let err = resolve(&json).unwrap_err();
        assert!(err.to_string().starts_with("dataDir:"), "{err}");
    }

    /// What the engine loads outside the sandbox (the ONNX Runtime library, the
    /// embedding model) may not come from the workspace, where a command could swap it
    /// for code that runs as the engine at the next start; by name, through `..`, or
    /// through a cache directory inside the workspace.
    #[test]
    fn code_the_engine_loads_is_refused_inside_the_workspace() {
        let home = env(&[("HOME", "/home/u")]);
        let etc = Path::new("/etc/klaw/engine.json");
        let resolve = |json: &str| {
            let raw = parse(etc, json).unwrap();
            Config::resolve(raw, ConfigSource::File(etc.to_path_buf()), &home)
        };
        for (json, key) in [
            (
                r#"{"workspace": "/w", "memory": {"runtimeLibrary": "/w/libonnxruntime.so"}}"#,
                "memory.runtimeLibrary",
            ),
            (
                r#"{"workspace": "/w", "memory": {"runtimeLibrary": "/x/../w/lib/ort.so"}}"#,
                "memory.runtimeLibrary",
            ),
            (
                r#"{"workspace": "/w", "memory": {"model": "/w/models/e5"}}"#,
                "memory.model",
            ),
            // The default cache (~/.cache/klaw) inside the workspace.
            (
                r#"{"workspace": "/home/u/.cache", "dataDir": "/d"}"#,
                "memory.runtimeLibrary",
            ),
        ] {
            let err = resolve(json).unwrap_err();
            assert!(
                matches!(&err, ConfigError::LoadedFromWorkspace { key: k, .. } if *k == key),
                "{json}: {err}"
            );
            assert!(err.to_string().contains("outside the sandbox"), "{err}");
        }
        resolve(
            r#"{"workspace": "/w", "memory": {"runtimeLibrary": "/opt/ort/libonnxruntime.so"}}"#,
        )
        .unwrap();
    }

    /// Issue 25: a config file inside the workspace (a project-local engine.json whose
    /// workspace is its own folder) let a command read the keys and turn the sandbox off
    /// for the next start. Refused by name, through `..`, through a symlinked file or
    /// workspace, and where the default path (no file yet) lies in the workspace.
    #[test]
    fn a_config_file_inside_the_workspace_is_refused() {
        let home = env(&[("HOME", "/home/u")]);
        let resolve = |config: &Path, json: &str| {
            let raw = parse(config, json).unwrap();
            Config::resolve(raw, ConfigSource::File(config.to_path_buf()), &home)
        };
        let etc = Path::new("/etc/klaw/engine.json");
        for json in [
            r#"{"workspace": "."}"#,
            r#"{"workspace": "/etc"}"#,
            r#"{"workspace": "/etc/klaw"}"#,
            r#"{"workspace": "/x/../etc/klaw"}"#,
        ] {
            let err = resolve(etc, json).unwrap_err().to_string();
            assert!(
                err.starts_with("the config file /etc/klaw/engine.json is inside the workspace")
                    && err.contains("llm.apiKey")
                    && err.contains("Move the config file out of the workspace"),
                "{json}: {err}"
            );
        }
        resolve(etc, r#"{"workspace": "ws"}"#).unwrap();
        resolve(etc, r#"{"workspace": "/etc/klaw-ws"}"#).unwrap();
        resolve(etc, r#"{"workspace": "/etc/klaw/../ws"}"#).unwrap();

        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        // The config file is a link to a file in the workspace.
        std::fs::write(ws.join("engine.json"), "{}").unwrap();
        let link = dir.path().join("engine.json");
        std::os::unix::fs::symlink(ws.join("engine.json"), &link).unwrap();
        let json = serde_json::json!({"workspace": ws, "dataDir": dir.path().join("d")});
        let err = resolve(&link, &json.to_string()).unwrap_err();
        assert!(
            matches!(err, ConfigError::ConfigInWorkspace { exists: true, .. }),
            "{err}"
        );
        // The workspace is a link to the config file's folder.
        let conf_dir = dir.path().join("conf");
        std::fs::create_dir_all(&conf_dir).unwrap();
        std::fs::write(conf_dir.join("engine.json"), "{}").unwrap();
        std::os::unix::fs::symlink(&conf_dir, dir.path().join("ws-link")).unwrap();
        let json = serde_json::json!({
            "workspace": dir.path().join("ws-link"),
            "dataDir": dir.path().join("d"),
        });
        let err = resolve(&conf_dir.join("engine.json"), &json.to_string()).unwrap_err();
        assert!(
            matches!(err, ConfigError::ConfigInWorkspace { .. }),
            "{err}"
        );
        // No file, but the default path is in the workspace: a command could create it.
        let e = env(&[
            ("HOME", "/home/u"),
            ("KLAW_WORKSPACE", "/home/u"),
            ("KLAW_DATA", "/d"),
        ]);
        let err = Config::resolve(
            EngineConfig::default(),
            ConfigSource::Defaults("/home/u/.config/klaw/engine.json".into()),
            &e,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.starts_with("the config file's default path (no file there yet)")
                && err.contains("create it"),
            "{err}"
        );
    }

    #[test]
    fn relative_paths_follow_the_file_and_tilde_is_home() {
        let e = env(&[("HOME", "/home/u"), ("KLAW_DATA", "rel-data")]);
        let raw = parse(
            Path::new("/etc/klaw/engine.json"),
            r#"{"workspace": "ws", "dataDir": "~/d"}"#,
        )
        .unwrap();
        let c = Config::resolve(
            raw.clone(),
            ConfigSource::File("/etc/klaw/engine.json".into()),
            &e,
        )
        .unwrap();
        assert_eq!(c.workspace, PathBuf::from("/etc/klaw/ws"));
        assert!(
            c.data_dir.is_absolute() && c.data_dir.ends_with("rel-data"),
            "{:?}",
            c.data_dir
        );
        let e = env(&[("HOME", "/home/u")]);
        let c =
            Config::resolve(raw, ConfigSource::File("/etc/klaw/engine.json".into()), &e).unwrap();
        assert_eq!(c.data_dir, PathBuf::from("/home/u/d"));
    }

    #[test]
    fn non_objects_and_bad_log_levels_are_refused() {
        let err = parse(Path::new("e.json"), "[]").unwrap_err().to_string();
        assert_eq!(
            err,
            "e.json: engine.json must be a JSON object: { \"key\": value, ... }"
        );
        for bad in ["verbose", "", "klaw=loud"] {
            let raw = EngineConfig {
                log_level: bad.into(),
                ..EngineConfig::default()
            };
            let err = Config::resolve(
                raw,
                ConfigSource::Defaults("x".into()),
                &env(&[("HOME", "/h")]),
            )
            .unwrap_err();
            assert!(err.to_string().starts_with("logLevel: "), "{err}");
        }
        for good in ["debug", "klaw::tools=debug,warn", "OFF"] {
            let raw = EngineConfig {
                log_level: good.into(),
                ..EngineConfig::default()
            };
            assert!(
                Config::resolve(
                    raw,
                    ConfigSource::Defaults("x".into()),
                    &env(&[("HOME", "/h")])
                )
                .is_ok(),
                "{good}"
            );
        }
    }

    #[test]
    fn a_bad_timezone_variable_is_named() {
        let e = env(&[("HOME", "/h"), ("KLAW_TIMEZONE", "Europe/Moskow")]);
        let err = resolve_defaults(&e).unwrap_err();
        assert!(
            err.to_string().starts_with(
                "environment variable KLAW_TIMEZONE=\"Europe/Moskow\": unknown time zone"
            ),
            "{err}"
        );
        let e = env(&[("HOME", "/h"), ("KLAW_TIMEZONE", "europe/moscow")]);
        let c = resolve_defaults(&e).unwrap();
        assert_eq!(c.timezone, "Europe/Moscow", "canonical spelling");
    }

    /// Issue 30: `memory.model` as a list (two vector spaces), from the file and from
    /// the variable (comma-separated); one model is written back as a string.
    #[test]
    fn memory_model_may_list_several_models() {
        let file = ConfigSource::File("/etc/klaw/engine.json".into());
        let raw = parse(
            Path::new("/etc/klaw/engine.json"),
            r#"{"memory": {"model": ["use-multilingual-v3", "./models/mine"]}}"#,
        )
        .unwrap();
        let c = Config::resolve(raw.clone(), file.clone(), &env(&[("HOME", "/h")])).unwrap();
        assert_eq!(
            c.memory_model_dir,
            Some(PathBuf::from("/h/.cache/klaw/models/use-multilingual-v3"))
        );
        assert_eq!(
            c.memory_more_model_dirs,
            [PathBuf::from("/etc/klaw/./models/mine")]
        );
        assert_eq!(
            c.memory().more_model_dirs,
            [PathBuf::from("/etc/klaw/./models/mine")]
        );
        assert_eq!(
            c.effective()["memory"]["model"],
            serde_json::json!(["use-multilingual-v3", "./models/mine"])
        );

        let e = env(&[
            ("HOME", "/h"),
            (
                "KLAW_MEMORY_MODEL",
                "multilingual-e5-small, use-multilingual-v3",
            ),
        ]);
        let c = Config::resolve(raw, file.clone(), &e).unwrap();
        assert_eq!(
            c.memory_model_dir,
            Some(PathBuf::from("/h/.cache/klaw/models/multilingual-e5-small"))
        );
        assert_eq!(
            c.memory_more_model_dirs,
            [PathBuf::from("/h/.cache/klaw/models/use-multilingual-v3")]
        );

        // one model, as a string or a list of one: the same, and no second space
        for json in [
            r#"{"memory": {"model": "multilingual-e5-small"}}"#,
            r#"{"memory": {"model": ["multilingual-e5-small"]}}"#,
        ] {
            let raw = parse(Path::new("e.json"), json).unwrap();
            let c = Config::resolve(raw, file.clone(), &env(&[("HOME", "/h")])).unwrap();
            assert!(c.memory_more_model_dirs.is_empty(), "{json}");
            assert_eq!(c.effective()["memory"]["model"], "multilingual-e5-small");
        }

        for (json, vars, want) in [
            (
                r#"{"memory": {"model": []}}"#,
                &[][..],
                "memory.model: must name a model",
            ),
            (
                r#"{"memory": {"model": ["use-multilingual-v3", ""]}}"#,
                &[][..],
                "memory.model: must name a model",
            ),
            (
                r#"{"memory": {"model": ["multilingual-e5-small", "multilingual-e5-small"]}}"#,
                &[][..],
                "memory.model: lists \"multilingual-e5-small\" twice",
            ),
            (
                "{}",
                &[(
                    "KLAW_MEMORY_MODEL",
                    "use-multilingual-v3,,multilingual-e5-small",
                )][..],
                "memory.model (set by KLAW_MEMORY_MODEL): must name a model",
            ),
        ] {
            let raw = parse(Path::new("e.json"), json).unwrap();
            let mut vars = vars.to_vec();
            vars.push(("HOME", "/h"));
            let err = Config::resolve(raw, file.clone(), &env(&vars))
                .unwrap_err()
                .to_string();
            assert!(err.starts_with(want), "{json}: {err}");
        }
        let err = parse(Path::new("e.json"), r#"{"memory": {"model": 7}}"#).unwrap_err();
        assert!(
            err.to_string()
                .contains("a model name or path, or an array of them"),
            "{err}"
        );
    }

    #[test]
    fn memory_defaults_come_from_the_cache() {
        let c = resolve_defaults(&env(&[("HOME", "/h")])).unwrap();
        assert_eq!(c.raw.memory, MemorySection::default());
        assert_eq!(
            c.memory_model_dir,
            Some(PathBuf::from("/h/.cache/klaw/models/use-multilingual-v3"))
        );
        assert_eq!(
            c.memory_runtime_library,
            Some(PathBuf::from(
                "/h/.cache/klaw/onnxruntime/libonnxruntime.so.1.31.1"
            ))
        );
        assert!(c.memory_threads >= 1);
        let c = resolve_defaults(&env(&[("HOME", "/h"), ("KLAW_CACHE", "/c")])).unwrap();
        assert_eq!(
            c.memory_model_dir,
            Some(PathBuf::from("/c/models/use-multilingual-v3"))
        );
        let effective = c.effective();
        assert_eq!(
            effective["memory"]["runtimeLibrary"],
            "/c/onnxruntime/libonnxruntime.so.1.31.1"
        );
        assert_eq!(effective["memory"]["model"], "use-multilingual-v3");
        assert_eq!(effective["memory"]["weights"]["text"], 1.0);
        assert_eq!(effective["memory"]["chunkTokens"], 256);
    }

    #[test]
    fn memory_keys_from_the_file_and_the_environment() {
        let raw = parse(
            Path::new("/etc/klaw/engine.json"),
            r#"{"memory": {"model": "all-minilm-l6-v2", "threads": 2,
                "weights": {"text": 0.5}, "chunkTokens": 128, "chunkOverlap": 16}}"#,
        )
        .unwrap();
        let file = ConfigSource::File("/etc/klaw/engine.json".into());
        let c = Config::resolve(raw.clone(), file.clone(), &env(&[("HOME", "/h")])).unwrap();
        assert_eq!(
            c.memory_model_dir,
            Some(PathBuf::from("/h/.cache/klaw/models/all-minilm-l6-v2"))
        );
        assert_eq!(c.memory_threads, 2);
        assert_eq!(
            c.raw.memory.weights,
            MemoryWeights {
                text: 0.5,
                vector: 1.0
            }
        );
        assert_eq!(
            (c.raw.memory.chunk_tokens, c.raw.memory.chunk_overlap),
            (128, 16)
        );

        // a path: relative to the file there, to the current directory from a variable
        let raw2 = parse(
            Path::new("/etc/klaw/engine.json"),
            r#"{"memory": {"model": "./models/mine", "runtimeLibrary": "~/lib/ort.so"}}"#,
        )
        .unwrap();
        let c = Config::resolve(raw2, file.clone(), &env(&[("HOME", "/h")])).unwrap();
        assert_eq!(
            c.memory_model_dir,
            Some(PathBuf::from("/etc/klaw/./models/mine"))
        );
        assert_eq!(
            c.memory_runtime_library,
            Some(PathBuf::from("/h/lib/ort.so"))
        );

        let e = env(&[
            ("HOME", "/h"),
            ("KLAW_MEMORY_MODEL", "/opt/model"),
            ("KLAW_MEMORY_RUNTIME_LIBRARY", "/opt/libonnxruntime.so"),
            ("KLAW_MEMORY_THREADS", "3"),
            ("KLAW_MEMORY_TEXT_WEIGHT", "2"),
            ("KLAW_MEMORY_VECTOR_WEIGHT", " 0.25 "),
            ("KLAW_MEMORY_CHUNK_TOKENS", "64"),
            ("KLAW_MEMORY_CHUNK_OVERLAP", "8"),
        ]);
        let c = Config::resolve(raw, file, &e).unwrap();
        assert_eq!(c.memory_model_dir, Some(PathBuf::from("/opt/model")));
        assert_eq!(
            c.memory_runtime_library,
            Some(PathBuf::from("/opt/libonnxruntime.so"))
        );
        assert_eq!(c.memory_threads, 3);
        assert_eq!(
            c.raw.memory.weights,
            MemoryWeights {
                text: 2.0,
                vector: 0.25
            }
        );
        assert_eq!(
            (c.raw.memory.chunk_tokens, c.raw.memory.chunk_overlap),
            (64, 8)
        );
    }

    #[test]
    fn bad_memory_values_name_the_key() {
        let cases = [
            (
                r#"{"memory": {"threads": 0}}"#,
                "memory.threads: must be at least 1",
            ),
            (
                r#"{"memory": {"weights": {"text": 0}}}"#,
                "memory.weights.text: 0 must be",
            ),
            (
                r#"{"memory": {"weights": {"vector": -1}}}"#,
                "memory.weights.vector: -1 must be",
            ),
            (
                r#"{"memory": {"chunkTokens": 4}}"#,
                "memory.chunkTokens: must be at least 8",
            ),
            (
                r#"{"memory": {"chunkTokens": 64, "chunkOverlap": 32}}"#,
                "memory.chunkOverlap: 32 must be less than half of memory.chunkTokens (64)",
            ),
            (
                r#"{"memory": {"model": ""}}"#,
                "memory.model: must name a model",
            ),
        ];
        for (json, want) in cases {
            let raw = parse(Path::new("e.json"), json).unwrap();
            let err = Config::resolve(
                raw,
                ConfigSource::Defaults("x".into()),
                &env(&[("HOME", "/h")]),
            )
            .unwrap_err()
            .to_string();
            assert!(err.starts_with(want), "{json}: {err}");
        }
        let err = parse(Path::new("e.json"), r#"{"memory": {"modelDir": "x"}}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field `modelDir`"), "{err}");
        let err = parse(
            Path::new("e.json"),
            r#"{"memory": {"weights": {"fts": 1}}}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("unknown field `fts`"), "{err}");
        let e = env(&[("HOME", "/h"), ("KLAW_MEMORY_TEXT_WEIGHT", "high")]);
        let err = resolve_defaults(&e).unwrap_err().to_string();
        assert_eq!(
            err,
            "environment variable KLAW_MEMORY_TEXT_WEIGHT=\"high\": expected a number"
        );
        let e = env(&[("HOME", "/h"), ("KLAW_MEMORY_THREADS", "0")]);
        let err = resolve_defaults(&e).unwrap_err().to_string();
        assert_eq!(
            err,
            "memory.threads (set by KLAW_MEMORY_THREADS): must be at least 1"
        );
    }

    #[cfg(feature = "memory")]
    #[test]
    fn memory_defaults_are_the_memory_modules_and_become_its_config() {
        use klaw_tools::tools::memory::{ChunkOptions, Weights};
        let c = resolve_defaults(&env(&[("HOME", "/h")])).unwrap();
        let m = c.memory();
        assert_eq!(m.chunk, ChunkOptions::default());
        assert_eq!(m.weights, Weights::default());
        assert_eq!(m.model_dir, c.memory_model_dir);
        assert_eq!(m.runtime_library, c.memory_runtime_library);
        assert_eq!(m.threads, Some(c.memory_threads));
        // The model and runtime library memory falls back to are the config's defaults.
        let (model, library) = klaw_tools::tools::memory::EmbedderConfig::default_paths().unwrap();
        assert_eq!(model.file_name().unwrap(), DEFAULT_MEMORY_MODEL);
        assert_eq!(library.file_name().unwrap(), DEFAULT_RUNTIME_LIBRARY);
    }

    /// The tables of `doc/config/engine-json.md` are the declarations; regenerate them
    /// with `KLAW_UPDATE_DOCS=1 cargo test -p klaw-engine --lib config` and read the diff.
    #[test]
    fn the_doc_tables_are_the_declarations() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../doc/config/engine-json.md");
        let doc = std::fs::read_to_string(&path).unwrap();
        let tables = keys::doc_tables(&EngineConfig::keys());
        for (name, _) in &tables {
            let marker = format!("<!-- generated: keys {name} -->");
            assert!(doc.contains(&marker), "{} lacks {marker}", path.display());
        }
        let want = keys::with_tables(&doc, &tables);
        if std::env::var_os("KLAW_UPDATE_DOCS").is_some() {
            std::fs::write(&path, &want).unwrap();
            return;
        }
        assert!(
            doc == want,
            "{} differs from the keys declared in config.rs; run \
             KLAW_UPDATE_DOCS=1 cargo test -p klaw-engine --lib config, then read the diff",
            path.display()
        );
    }

    /// The web settings: `BRAVE_API_KEY` when `web.braveApiKey` is unset (the key wins),
    /// the allow-list from its variable, and an entry that is not `host:port` refused.
    #[test]
    fn web_settings_come_from_the_section_and_brave_api_key() {
        let c = resolve_defaults(&env(&[
            ("HOME", "/h"),
            ("BRAVE_API_KEY", "from-env"),
            (
                "KLAW_WEB_ALLOWED_PRIVATE_HOSTS",
                "127.0.0.1:8080,wiki.lan:443",
            ),
        ]))
        .unwrap();
        let w = c.web();
        assert_eq!(w.brave_api_key.as_deref(), Some("from-env"));
        assert_eq!(w.allowed_private_hosts, ["127.0.0.1:8080", "wiki.lan:443"]);
        let c = resolve_defaults(&env(&[
            ("HOME", "/h"),
            ("BRAVE_API_KEY", "from-env"),
            ("KLAW_BRAVE_API_KEY", "from-key"),
        ]))
        .unwrap();
        assert_eq!(c.web().brave_api_key.as_deref(), Some("from-key"));
        assert_eq!(c.effective()["web"]["braveApiKey"], "***");
        let e = resolve_defaults(&env(&[
            ("HOME", "/h"),
            ("KLAW_WEB_ALLOWED_PRIVATE_HOSTS", "127.0.0.1"),
        ]))
        .unwrap_err();
        assert!(e.to_string().contains("web.allowedPrivateHosts"), "{e}");
    }

    /// The doc's full example sets every key, and `klaw-engine config` prints it back
    /// exactly (same keys, same order).
    #[test]
    fn api_keys_are_never_printed() {
        let raw = parse(
            Path::new("e.json"),
            r#"{"llm": {"apiKey": "sk-file-secret", "models": {"b": {"model": "m", "apiKey": "sk-named"}}}, "gateway": {"telegramToken": "sk-bot"}}"#,
        )
        .unwrap();
        let c = Config::resolve(
            raw,
            ConfigSource::File(Path::new("e.json").into()),
            &env(&[("HOME", "/h")]),
        )
        .unwrap();
        let shown = c.effective().to_string();
        assert!(!shown.contains("sk-"), "{shown}");
        assert_eq!(c.effective()["llm"]["apiKey"], "***");
        assert_eq!(c.effective()["llm"]["models"]["b"]["apiKey"], "***");
        assert_eq!(c.effective()["gateway"]["telegramToken"], "***");
        let c = resolve_defaults(&env(&[("HOME", "/h"), ("KLAW_LLM_API_KEY", "sk-env")])).unwrap();
        assert_eq!(
            c.raw.llm.api_key.as_ref().map(Secret::expose),
            Some("sk-env")
        );
        assert!(!format!("{c:?}").contains("sk-"), "Debug shows no secret");
        assert_eq!(c.effective()["llm"]["apiKey"], "***");
    }

    #[test]
    fn llm_values_are_checked_by_name() {
        for (json, message) in [
            (
                r#"{"llm": {"provider": "gemini"}}"#,
                "unknown variant `gemini`",
            ),
            (
                r#"{"llm": {"baseUrl": "ftp://x"}}"#,
                "llm.baseUrl: \"ftp://x\" is not an http:// or https:// URL",
            ),
            (
                r#"{"llm": {"retries": 11}}"#,
                "llm.retries: 11 is more than 10",
            ),
            (
                r#"{"llm": {"models": {"s": {"model": " "}}}}"#,
                "llm.models: `s`: `model` is empty",
            ),
            (
                r#"{"llm": {"models": {"s": {"model": "m", "temp": 1}}}}"#,
                "unknown field `temp`",
            ),
        ] {
            let err = parse(Path::new("e.json"), json)
                .map_err(|e| e.to_string())
                .and_then(|raw| {
                    Config::resolve(
                        raw,
                        ConfigSource::File(Path::new("e.json").into()),
                        &env(&[("HOME", "/h")]),
                    )
                    .map(|_| ())
                    .map_err(|e| e.to_string())
                })
                .unwrap_err();
            assert!(err.contains(message), "{json}: {err}");
        }
        let err =
            resolve_defaults(&env(&[("HOME", "/h"), ("KLAW_LLM_PROTOCOL", "xml")])).unwrap_err();
        assert!(err.to_string().contains("KLAW_LLM_PROTOCOL"), "{err}");
    }

    #[test]
    fn the_full_example_is_printed_back() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../doc/config/engine-json.md");
        let doc = std::fs::read_to_string(&path).unwrap();
        let example = doc.split("## A full example").nth(1).unwrap();
        let json = example.split("```json\n").nth(1).unwrap();
        let json = json.split("```").next().unwrap();
        let raw = parse(&path, json).unwrap();
        let c = Config::resolve(raw, ConfigSource::File(path), &env(&[("HOME", "/h")])).unwrap();
        let printed = serde_json::to_string_pretty(&c.effective()).unwrap();
        assert_eq!(printed.trim(), json.trim());
        let declared = EngineConfig::keys().len();
        let leaves = json.matches("\": ").count();
        assert_eq!(leaves, declared, "the example sets every key and section");
    }

    /// Every declared key is in `klaw-engine config`'s output, every variable belongs to
    /// one key, and every variable is read.
    #[test]
    fn every_key_is_in_the_effective_config_with_its_own_variable() {
        let keys = EngineConfig::keys();
        let c = resolve_defaults(&env(&[("HOME", "/h")])).unwrap();
        let effective = c.effective();
        let mut vars = std::collections::HashSet::new();
        for k in &keys {
            let mut v = &effective;
            for part in k.key.split('.') {
                v = v
                    .get(part)
                    .unwrap_or_else(|| panic!("{} is not in {effective}", k.key));
            }
            if let Some(var) = k.env {
                assert!(vars.insert(var), "{var} is declared twice");
                assert!(var.starts_with("KLAW_"), "{var}");
            }
        }
        // Every variable is read: set to a value unlike any default, it is either refused
        // by name or changes its key in the output.
        for k in &keys {
            let Some(var) = k.env else { continue };
            let pairs = [("HOME", "/h"), (var, "\u{1}not a value\u{1}")];
            let e = env(&pairs);
            match resolve_defaults(&e) {
                Err(err) => assert!(err.to_string().contains(var), "{var}: {err}"),
                Ok(set) => {
                    let at = |v: &serde_json::Value| {
                        k.key.split('.').fold(v.clone(), |v, part| v[part].clone())
                    };
                    assert_ne!(at(&set.effective()), at(&effective), "{var} was not read");
                }
            }
        }
    }

    #[test]
    fn the_mcp_token_is_never_printed() {
        let token = "0123456789abcdef-secret";
        let e = env(&[("HOME", "/h"), ("KLAW_MCP_TOKEN", token)]);
        let c = resolve_defaults(&e).unwrap();
        assert_eq!(c.raw.mcp.token.as_ref().map(Secret::expose), Some(token));
        let printed = c.effective().to_string();
        assert!(!printed.contains("secret"), "{printed}");
        assert_eq!(c.effective()["mcp"]["token"], "***");
        let e = env(&[("HOME", "/h"), ("KLAW_MCP_TOKEN", "short")]);
        let err = resolve_defaults(&e).unwrap_err().to_string();
        assert!(
            err.starts_with("mcp.token (set by KLAW_MCP_TOKEN): must be at least 16"),
            "{err}"
        );
        assert!(!err.contains("short"), "the value is not echoed: {err}");
    }

    #[test]
    fn missing_explicit_config_is_an_error() {
        let e = env(&[("HOME", "/h"), ("KLAW_CONFIG", "/nonexistent/engine.json")]);
        assert!(matches!(
            Config::load_with(&e),
            Err(ConfigError::Missing(_))
        ));
    }
}
