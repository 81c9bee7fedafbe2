//! `mnemo serve` as a client meets it: a real process on a loopback port, with API keys made
//! by `mnemo keys create`, stopped with SIGTERM when dropped.

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};

/// A running `mnemo serve`.
pub(crate) struct Served {
    child: Option<Child>,
    /// `http://127.0.0.1:PORT`.
    pub(crate) url: String,
    /// An admin key.
    pub(crate) admin_key: String,
}

/// Makes an API key with `mnemo keys create ARGS` on the store of `dir`; the key is the last
/// line of its output.
pub(crate) fn create_key(dir: &Path, args: &[&str]) -> String {
    let output = super::mnemo_in(dir)
        .args(["keys", "create"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "mnemo keys create {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).unwrap();
    stdout.lines().last().unwrap().trim().to_owned()
}

impl Served {
    /// A request with `key` (and, for an admin key, `X-Mnemo-User: act_for`): its status and
    /// its body as JSON (a JSON string when it is not JSON, as the export's lines are not).
    pub(crate) async fn call(
        &self,
        key: Option<&str>,
        act_for: Option<&str>,
        method: reqwest::Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> (reqwest::StatusCode, serde_json::Value) {
        let mut request = reqwest::Client::new().request(method, format!("{}{path}", self.url));
        if let Some(key) = key {
            request = request.bearer_auth(key);
        }
        if let Some(user) = act_for {
            request = request.header("X-Mnemo-User", user);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        let text = response.text().await.unwrap();
        let value = serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text));
        (status, value)
    }

    /// Writes `config` to `dir/config.toml`, makes an admin key, and starts `mnemo serve` on a
    /// free loopback port with `extra` arguments; returns once it listens.
    pub(crate) fn start(dir: &Path, config: &str, extra: &[&str]) -> Self {
        std::fs::write(dir.join("config.toml"), config).unwrap();
        let admin_key = create_key(dir, &["--admin"]);
        let mut child = super::mnemo_in(dir)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        let url = line
            .trim()
            .strip_prefix("mnemo serve: listening on ")
            .unwrap_or_else(|| panic!("unexpected first line from mnemo serve: {line:?}"))
            .to_owned();
        Self {
            child: Some(child),
            url,
            admin_key,
        }
    }

    /// Sends SIGTERM and waits; true when it exited successfully.
    #[allow(dead_code)] // Not every test binary stops its server by hand.
    pub(crate) fn stop(mut self) -> bool {
        self.terminate()
    }

    fn terminate(&mut self) -> bool {
        let Some(mut child) = self.child.take() else {
            return true;
        };
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        child.wait().map(|status| status.success()).unwrap_or(false)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.terminate();
    }
}
