//! `klaw-engine run`: the long-running engine. The gateway's channels (Telegram when a
//! token is set) feed the agent, one conversation per allowed chat, answers going back
//! through the gateway; the MCP HTTP server runs beside when `mcp.enabled`. Stops on
//! SIGINT or SIGTERM: no new turns, running ones get a grace period, the engine shuts
//! down (the history already holds every message).

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use klaw_tools::Caller;
use tokio_util::sync::CancellationToken;

use crate::Config;
use crate::agent::Agent;
use crate::gateway::{Gateway, Incoming};
use crate::llm::Model;

/// How long running turns get to finish after a stop signal.
const GRACE: Duration = Duration::from_secs(10);

pub(crate) fn run(config: Config) -> ExitCode {
    let telegram = config
        .raw
        .gateway
        .telegram_token
        .as_ref()
        .map(crate::Secret::expose)
        .is_some_and(|t| !t.is_empty());
    let model = match Model::from_config(&config, None) {
        Ok(m) => Some(m),
        Err(e) if telegram => return super::fail(&e.to_string()),
        Err(_) => None,
    };
    if !telegram && !config.raw.mcp.enabled {
        return super::fail(
            "nothing to run: set gateway.telegramToken (KLAW_TELEGRAM_TOKEN) for Telegram, \
             or mcp.enabled (KLAW_MCP_ENABLED=true) for the MCP server over HTTP",
        );
    }
    let mcp_bind = if config.raw.mcp.enabled {
        match config.raw.mcp.bind.parse::<std::net::SocketAddr>() {
            Ok(b) => match crate::mcp::http::check_bind(
                b,
                config.raw.mcp.token.as_ref().map(crate::Secret::expose),
            ) {
                Ok(()) => Some(b),
                Err(e) => return super::fail(&e),
            },
            Err(_) => {
                return super::fail(&format!(
                    "mcp.bind {:?} is not an address",
                    config.raw.mcp.bind
                ));
            }
        }
    } else {
        None
    };
    crate::app::run_front(config, model, |app| async move {
        let gateway = app.gateway().clone();
        app.watch_signals("stopping");
        let mcp = mcp_bind.map(|b| {
            let stop = app.stop_token().child_token();
            tokio::spawn(crate::mcp::http::serve(app.engine().clone(), b, stop))
        });
        // No new turn after the stop; running ones get the grace period below.
        let stop = app.stop_token().child_token();
        let (inbox, mut incoming) = tokio::sync::mpsc::channel::<Incoming>(256);
        let mut receivers = Vec::new();
        for name in gateway.channel_names() {
            if let Some(c) = gateway.channel(&name) {
                receivers.push(tokio::spawn(
                    Arc::clone(c).receive(inbox.clone(), stop.clone()),
                ));
            }
        }
        drop(inbox);
        let agent = app.agent().cloned();
        eprintln!(
            "klaw-engine: running (channels: {}{}); SIGINT or SIGTERM to stop",
            gateway.channel_names().join(", "),
            mcp_bind
                .map(|b| format!("; MCP at http://{b}/mcp"))
                .unwrap_or_default()
        );
        let mut chats: HashMap<String, tokio::sync::mpsc::UnboundedSender<Incoming>> =
            HashMap::new();
        let mut workers = Vec::new();
        loop {
            let message = tokio::select! {
                m = incoming.recv() => m,
                () = stop.cancelled() => break,
            };
            let Some(message) = message else {
                // Every channel stopped receiving; serve MCP (if any) until a signal.
                if mcp.is_some() {
                    stop.cancelled().await;
                }
                break;
            };
            if !gateway.is_allowed(&message.channel, &message.chat_id) {
                tracing::warn!(
                    target: "klaw::gateway",
                    channel = message.channel,
                    chat_id = message.chat_id,
                    from = message.from,
                    "a message from a chat off gateway.allowedChatIds was ignored"
                );
                continue;
            }
            let Some(agent) = agent.clone() else { continue };
            let key = message.key();
            let worker = chats.entry(key.clone()).or_insert_with(|| {
                let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
                workers.push(tokio::spawn(converse(
                    agent,
                    gateway.clone(),
                    key,
                    rx,
                    stop.clone(),
                )));
                tx
            });
            let _ = worker.send(message);
        }
        app.stop();
        drop(chats);
        let all = futures_util::future::join_all(workers);
        if tokio::time::timeout(GRACE, all).await.is_err() {
            eprintln!(
                "klaw-engine: turns still running after {}s were stopped",
                GRACE.as_secs()
            );
        }
        for r in receivers {
            r.abort();
        }
        // The MCP server stopped with the token (its connections had 5 s to finish).
        if let Some(m) = mcp {
            match tokio::time::timeout(Duration::from_secs(6), m).await {
                Ok(Ok(Err(e))) => eprintln!("klaw-engine: {e}"),
                Ok(_) => {}
                Err(_) => {
                    tracing::warn!(target: "klaw::mcp", "the MCP server did not stop in time")
                }
            }
        }
        ExitCode::SUCCESS
    })
}

/// One chat's conversation: its messages in order, each answer sent back; after `stop`,
/// no new turn starts (the one running finishes within the grace period).
async fn converse(
    agent: Agent,
    gateway: Gateway,
    key: String,
    mut messages: tokio::sync::mpsc::UnboundedReceiver<Incoming>,
    stop: CancellationToken,
) {
    loop {
        let m = tokio::select! {
            biased;
            () = stop.cancelled() => return,
            m = messages.recv() => match m {
                Some(m) => m,
                None => return,
            },
        };
        let caller = Caller::new(m.channel.clone(), Some(m.chat_id.clone()));
        match agent.turn(&key, caller, &m.text, &()).await {
            Ok(answer) if answer.trim().is_empty() => {}
            Ok(answer) => {
                if let Err(e) = gateway.send(&m.channel, &m.chat_id, &answer).await {
                    tracing::error!(target: "klaw::gateway", chat = key, "the answer was not sent: {e}");
                }
            }
            Err(e) => {
                tracing::error!(target: "klaw::agent", chat = key, "the turn failed: {e}");
                let _ = gateway
                    .send(
                        &m.channel,
                        &m.chat_id,
                        &format!("Sorry, I could not answer: {e}"),
                    )
                    .await;
            }
        }
    }
}
