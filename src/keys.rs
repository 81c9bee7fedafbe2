//! `mnemo serve` and `mnemo keys`: the HTTP server, and the API keys it checks.

use anyhow::Context as _;
use clap::Subcommand;
use mnemo_kernel::host::Config;
use mnemo_server::{KeyStore, NewKey, ServeOptions, Server};

#[derive(Debug, Subcommand)]
pub(crate) enum KeysCommand {
    /// Make a key; it is printed once, alone on the last line, and stored only hashed.
    Create {
        /// The user it acts for.
        #[arg(long, value_parser = crate::user_id, required_unless_present = "admin")]
        user: Option<String>,
        /// An admin key: acts for any user named in `X-Mnemo-User`, and runs jobs.
        #[arg(long, conflicts_with_all = ["user", "chats"])]
        admin: bool,
        /// Bind it to this chat (repeatable): it may act only there.
        #[arg(long = "chat", value_parser = crate::chat_id)]
        chats: Vec<String>,
        /// A note for people: who holds it.
        #[arg(long)]
        label: Option<String>,
    },
    /// Every key: id, user, chats, when made and revoked.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Revoke a key by id; every server on the store refuses it from its next request.
    Revoke {
        /// The key's id (`mnemo keys list`).
        id: String,
    },
}

/// `mnemo keys …`: against the configured memory store, where every server on it reads them.
pub(crate) async fn run(config: Config, command: &KeysCommand) -> anyhow::Result<bool> {
    let data_dir = config.data_dir();
    let kernel = crate::commands::start_for_store(config).await?;
    let result = run_on(&kernel, &data_dir, command).await;
    kernel.shutdown().await;
    result
}

async fn run_on(
    kernel: &mnemo_kernel::host::Kernel,
    data_dir: &std::path::Path,
    command: &KeysCommand,
) -> anyhow::Result<bool> {
    let store = KeyStore::new(crate::commands::memory_service(kernel)?);
    mnemo_server::keys::import_announced(&store, data_dir).await?;
    match command {
        KeysCommand::Create {
            user,
            admin,
            chats,
            label,
        } => {
            let (record, key) = store
                .create(NewKey {
                    user_id: user.clone(),
                    admin: *admin,
                    chats: chats.clone(),
                    label: label.clone(),
                })
                .await?;
            let whom = record.user_id.as_deref().map_or_else(
                || "any user (admin)".to_owned(),
                |user| format!("user {user}"),
            );
            eprintln!(
                "made key {} for {whom}; it is shown once, here, and stored only hashed in the \
                 memory store:",
                record.id
            );
            println!("{key}");
        }
        KeysCommand::List { json } => {
            let keys = store.list().await?;
            if *json {
                let listed: Vec<serde_json::Value> = keys
                    .iter()
                    .map(|key| {
                        serde_json::json!({
                            "id": key.id, "user_id": key.user_id, "admin": key.admin,
                            "chats": key.chats, "label": key.label,
                            "created_at": key.created_at, "revoked_at": key.revoked_at,
                        })
                    })
                    .collect();
                println!("{}", serde_json::Value::Array(listed));
            } else {
                if keys.is_empty() {
                    println!("no keys; `mnemo keys create --user U` makes one");
                }
                for key in keys {
                    println!(
                        "{:<16} {:<20} {:<20} {:<26} {}",
                        key.id,
                        key.user_id.as_deref().unwrap_or("(admin)"),
                        if key.chats.is_empty() {
                            "-".to_owned()
                        } else {
                            key.chats.join(",")
                        },
                        key.created_at.to_rfc3339(),
                        key.revoked_at.map_or_else(
                            || "active".to_owned(),
                            |at| format!("revoked {}", at.to_rfc3339())
                        )
                    );
                }
            }
        }
        KeysCommand::Revoke { id } => {
            let record = store.revoke(id).await?;
            println!("revoked {}", record.id);
        }
    }
    Ok(true)
}

/// `mnemo serve`: starts the kernel, binds, prints the address and serves until Ctrl-C or
/// SIGTERM.
pub(crate) async fn serve(config: Config, options: &ServeOptions) -> anyhow::Result<()> {
    let (kernel, sampling) = crate::commands::start_serving(config).await?;
    let server = match Server::bind(kernel.clone(), options, sampling).await {
        Ok(server) => server,
        Err(error) => {
            kernel.shutdown().await;
            return Err(error);
        }
    };
    let address = server.local_addr().context("the bound address")?;
    // Scripts and tests read the address from this line.
    println!("mnemo serve: listening on http://{address}");
    server.run(stop_signal()).await
}

/// Resolves on Ctrl-C or, on Unix, SIGTERM.
async fn stop_signal() {
    let interrupt = async {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::warn!(%error, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
    tracing::info!("stopping: finishing the requests in flight");
}
