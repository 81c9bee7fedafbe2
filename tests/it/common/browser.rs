//! A real browser for tests: headless Chromium driven through Debian's `chromedriver` with the
//! W3C WebDriver protocol (JSON over HTTP), which is all a test needs to load a page, type,
//! click, read text and take screenshots. `scripts/setup` installs both programs.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{json, Value};

/// WebDriver's key for an element reference in JSON.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";
/// How long a wait for the page lasts before the test fails.
const WAIT: Duration = Duration::from_secs(20);

/// A headless Chromium session; the driver is stopped when it is dropped.
pub(crate) struct Browser {
    driver: Child,
    http: reqwest::Client,
    session: String,
    screenshots: PathBuf,
}

/// A program on `PATH`, or the reason the test cannot run.
fn program(name: &str) -> PathBuf {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
        .unwrap_or_else(|| {
            panic!("`{name}` is not installed: run scripts/setup (Debian's chromium and chromium-driver)")
        })
}

/// A loopback port nobody listens on now.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

impl Browser {
    /// Starts chromedriver and a headless Chromium with a window of 1280 × 900; screenshots go
    /// to `screenshots`.
    pub(crate) async fn start(screenshots: &Path) -> Self {
        std::fs::create_dir_all(screenshots).unwrap();
        let port = free_port();
        let driver = Command::new(program("chromedriver"))
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let http = reqwest::Client::new();
        let base = format!("http://127.0.0.1:{port}");
        let started = Instant::now();
        while http.get(format!("{base}/status")).send().await.is_err() {
            assert!(started.elapsed() < WAIT, "chromedriver did not start");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let chromium = program("chromium");
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--window-size=1280,900",
                         "--no-first-run", "--no-default-browser-check"],
            },
        }}});
        let answer: Value = http
            .post(format!("{base}/session"))
            .json(&capabilities)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let session = answer["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("chromedriver gave no session: {answer}"))
            .to_owned();
        Self {
            driver,
            http,
            session: format!("{base}/session/{session}"),
            screenshots: screenshots.to_owned(),
        }
    }

    /// A WebDriver command; its `value`, or a panic with the driver's error.
    async fn command(&self, method: reqwest::Method, path: &str, body: Value) -> Value {
        let mut request = self
            .http
            .request(method.clone(), format!("{}{path}", self.session));
        if method != reqwest::Method::GET {
            request = request.json(&body);
        }
        let answer: Value = request.send().await.unwrap().json().await.unwrap();
        if answer["value"]["error"].is_string() {
            panic!("WebDriver {method} {path}: {}", answer["value"]);
        }
        answer["value"].clone()
    }

    /// Loads `url`.
    pub(crate) async fn open(&self, url: &str) {
        self.command(reqwest::Method::POST, "/url", json!({ "url": url }))
            .await;
    }

    /// Runs `script` in the page with `args`; what it returns.
    pub(crate) async fn run(&self, script: &str, args: Value) -> Value {
        self.command(
            reqwest::Method::POST,
            "/execute/sync",
            json!({"script": script, "args": args}),
        )
        .await
    }

    /// The visible text of the first element matching `css`, or `None` if there is none or it
    /// is hidden.
    pub(crate) async fn text(&self, css: &str) -> Option<String> {
        self.run(
            "const node = document.querySelector(arguments[0]);\
             return node && node.offsetParent !== null ? node.innerText : null;",
            json!([css]),
        )
        .await
        .as_str()
        .map(str::to_owned)
    }

    /// Waits until the first element matching `css` is shown and its text satisfies `check`;
    /// returns the text. Fails with what the page's status line says.
    pub(crate) async fn wait_for(
        &self,
        css: &str,
        what: &str,
        check: impl Fn(&str) -> bool,
    ) -> String {
        let started = Instant::now();
        loop {
            if let Some(text) = self.text(css).await {
                if check(&text) {
                    return text;
                }
            }
            if started.elapsed() > WAIT {
                let status = self.text("#status").await.unwrap_or_default();
                let shown = self.text(css).await;
                panic!("waited {WAIT:?} for {what} in `{css}` (it shows {shown:?}; the status line says {status:?})");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The element matching `css`, which must exist.
    async fn element(&self, css: &str) -> String {
        let found = self
            .command(
                reqwest::Method::POST,
                "/element",
                json!({"using": "css selector", "value": css}),
            )
            .await;
        found[ELEMENT]
            .as_str()
            .unwrap_or_else(|| panic!("no element `{css}`"))
            .to_owned()
    }

    /// Clicks the element matching `css`, as a person would.
    pub(crate) async fn click(&self, css: &str) {
        let element = self.element(css).await;
        self.command(
            reqwest::Method::POST,
            &format!("/element/{element}/click"),
            json!({}),
        )
        .await;
    }

    /// Types `text` into the element matching `css`, after clearing it.
    pub(crate) async fn type_into(&self, css: &str, text: &str) {
        let element = self.element(css).await;
        self.command(
            reqwest::Method::POST,
            &format!("/element/{element}/clear"),
            json!({}),
        )
        .await;
        self.command(
            reqwest::Method::POST,
            &format!("/element/{element}/value"),
            json!({ "text": text }),
        )
        .await;
    }

    /// Saves a screenshot of the window as `name`.png; returns its path.
    pub(crate) async fn screenshot(&self, name: &str) -> PathBuf {
        let encoded = self
            .command(reqwest::Method::GET, "/screenshot", Value::Null)
            .await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(encoded.as_str().unwrap())
            .unwrap();
        assert!(png.starts_with(b"\x89PNG"), "a screenshot is a PNG");
        let path = self.screenshots.join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap();
        path
    }
}

impl Browser {
    /// Ends the session, which closes Chromium, then stops the driver.
    pub(crate) async fn quit(self) {
        let _ = self.http.delete(&self.session).send().await;
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
