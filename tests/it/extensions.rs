//! Extensions through the kernel's public API: config switches, roles, services, isolation of
//! failures, virtual-time scheduling and shutdown.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, TimeZone, Utc};
use mnemo_kernel::host::{Config, Kernel};
use mnemo_kernel::{
    BoxError, ContextRequest, Event, EventHandler, EventPayload, Extension, ExtensionFactory,
    ExtensionSection, KernelContext, KernelError, Registrar, ToolError, ToolProvider, ToolScope,
    ToolSpec,
};
use serde_json::{json, Value};

fn t(day: u32, hour: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 7, day, hour, 0, 0).unwrap()
}

async fn kernel_with(
    registry: mnemo_kernel::host::ExtensionRegistry,
    text: &str,
) -> (Kernel, tempfile::TempDir) {
    let config = Config::parse(text, "test.toml").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kernel = Kernel::builder(registry, config)
        .virtual_clock(t(1, 12))
        .data_dir(dir.path())
        .start()
        .await
        .unwrap();
    (kernel, dir)
}

fn scope() -> ToolScope {
    ToolScope {
        user_id: "ana".into(),
        session_id: Some("s1".into()),
        chat_id: None,
        at: t(1, 12),
        caller: mnemo_kernel::ToolCaller::Client,
    }
}

fn request(prompt: &str) -> ContextRequest {
    ContextRequest {
        prompt: prompt.into(),
        user_id: "ana".into(),
        session_id: "s1".into(),
        chat_id: None,
        at: t(1, 12),
        history_messages: 0,
        as_of: None,
    }
}

#[tokio::test]
async fn disabling_an_extension_removes_its_tools_context_and_jobs() {
    let (enabled, _dir_enabled) = kernel_with(
        mnemo_devtools::dev_extensions(),
        "[extensions.notes]\nenabled = true\n",
    )
    .await;
    enabled
        .call_tool(
            &scope(),
            "add_note",
            json!({"text": "the gate code is 1234"}),
        )
        .await
        .unwrap();
    assert_eq!(enabled.tools().len(), 2);
    assert_eq!(enabled.jobs().len(), 1);
    let blocks = enabled
        .gather_context(&request("what is the gate code?"))
        .await;
    assert_eq!(blocks.len(), 1, "{blocks:?}");
    assert_eq!(blocks[0].0, "notes");

    let (disabled, _dir_disabled) = kernel_with(
        mnemo_devtools::dev_extensions(),
        "[extensions.notes]\nenabled = false\n",
    )
    .await;
    assert!(disabled.tools().is_empty());
    assert!(disabled.jobs().is_empty());
    assert!(disabled
        .gather_context(&request("what is the gate code?"))
        .await
        .is_empty());
    assert_eq!(
        disabled
            .call_tool(&scope(), "add_note", json!({"text": "x"}))
            .await,
        Err(ToolError::UnknownTool("add_note".into()))
    );
    assert!(matches!(
        disabled.run_job("notes_digest").await,
        Err(KernelError::UnknownJob(_))
    ));
    assert!(disabled.extension_names().is_empty());
    enabled.shutdown().await;
    disabled.shutdown().await;
}

#[tokio::test]
async fn a_daily_job_fires_once_per_simulated_day_across_a_ten_day_jump() {
    let (kernel, _dir_kernel) = kernel_with(
        mnemo_devtools::dev_extensions(),
        "[extensions.notes]\ndigest_cron = \"0 3 * * *\"\n",
    )
    .await;
    let runs = kernel.advance_to(t(11, 12)).await.unwrap();
    let times: Vec<DateTime<Utc>> = runs.iter().map(|run| run.at).collect();
    let expected: Vec<DateTime<Utc>> = (2..=11).map(|day| t(day, 3)).collect();
    assert_eq!(times, expected, "one run per day at 03:00, in order");
    assert!(runs.iter().all(|run| run.outcome.is_ok()));
    assert_eq!(kernel.context().now(), t(11, 12));
    assert_eq!(kernel.context().router().published("notes.digest"), 10);
    // Going nowhere fires nothing; going back is refused.
    assert!(kernel.advance_to(t(11, 12)).await.unwrap().is_empty());
    assert!(matches!(
        kernel.advance_to(t(5, 0)).await,
        Err(KernelError::ClockBackwards { .. })
    ));
    kernel.shutdown().await;
}

// --- A small third-party extension pair written against the public API only. ---

/// The typed API one extension publishes for another.
trait Counter: Send + Sync {
    fn bump(&self) -> usize;
}

#[derive(Default)]
struct AtomicCounter(AtomicUsize);
impl Counter for AtomicCounter {
    fn bump(&self) -> usize {
        self.0.fetch_add(1, Ordering::SeqCst) + 1
    }
}

struct CounterExtension {
    counter: Arc<AtomicCounter>,
}

#[async_trait]
impl Extension for CounterExtension {
    fn name(&self) -> &str {
        "counter"
    }
    fn register(&self, registrar: &mut Registrar<'_>) -> Result<(), BoxError> {
        registrar.provide::<dyn Counter>(self.counter.clone());
        Ok(())
    }
}

/// Calls the counter through the service, and records events; fails or panics on request.
#[derive(Default)]
struct ConsumerExtension {
    seen: Mutex<Vec<String>>,
    delay_ms: u64,
}

#[async_trait]
impl Extension for ConsumerExtension {
    fn name(&self) -> &str {
        "consumer"
    }
    async fn start(&self, ctx: &KernelContext) -> Result<(), BoxError> {
        if ctx.services().get::<dyn Counter>().is_none() {
            return Err("the counter service is missing".into());
        }
        Ok(())
    }
    fn tool_provider(&self) -> Option<&dyn ToolProvider> {
        Some(self)
    }
    fn event_handler(&self) -> Option<&dyn EventHandler> {
        Some(self)
    }
}

#[async_trait]
impl ToolProvider for ConsumerExtension {
    fn tools(&self) -> Vec<ToolSpec> {
        vec![ToolSpec {
            name: "bump".into(),
            description: "bump the shared counter".into(),
            parameters: json!({"type": "object", "properties": {}, "additionalProperties": false}),
        }]
    }
    async fn call_tool(
        &self,
        ctx: &KernelContext,
        _scope: &ToolScope,
        name: &str,
        _arguments: Value,
    ) -> Result<Value, ToolError> {
        let counter = ctx
            .services()
            .get::<dyn Counter>()
            .ok_or_else(|| ToolError::failed(name, "no counter"))?;
        Ok(json!(counter.bump()))
    }
}

#[async_trait]
impl EventHandler for ConsumerExtension {
    fn topics(&self) -> Vec<String> {
        vec!["user_message".into()]
    }
    async fn handle(&self, _ctx: &KernelContext, event: &Event) -> Result<(), BoxError> {
        if self.delay_ms > 0 {
            tokio::time::sleep(Duration::from_millis(self.delay_ms)).await;
        }
        let text = event.payload.text().unwrap_or_default().to_owned();
        match text.as_str() {
            "panic" => panic!("asked to panic"),
            "error" => Err("asked to fail".into()),
            _ => {
                self.seen.lock().unwrap().push(text);
                Ok(())
            }
        }
    }
}

thread_local! {
    /// The consumer the factory built on this test's thread (each tokio test has its own thread).
    static CONSUMER: std::cell::RefCell<Option<Arc<ConsumerExtension>>> = const { std::cell::RefCell::new(None) };
}

fn registry() -> mnemo_kernel::host::ExtensionRegistry {
    mnemo_devtools::dev_extensions()
        .with(ExtensionFactory {
            name: "counter",
            description: "test: publishes a Counter service",
            build: |_section: &ExtensionSection| {
                Ok(Arc::new(CounterExtension {
                    counter: Arc::new(AtomicCounter::default()),
                }) as Arc<dyn Extension>)
            },
        })
        .with(ExtensionFactory {
            name: "consumer",
            description: "test: uses the Counter service",
            build: |section: &ExtensionSection| {
                #[derive(serde::Deserialize, Default)]
                #[serde(deny_unknown_fields, default)]
                struct ConsumerConfig {
                    delay_ms: u64,
                }
                let config: ConsumerConfig = section.parse()?;
                let extension = Arc::new(ConsumerExtension {
                    delay_ms: config.delay_ms,
                    ..ConsumerExtension::default()
                });
                CONSUMER.with(|cell| *cell.borrow_mut() = Some(extension.clone()));
                Ok(extension as Arc<dyn Extension>)
            },
        })
}

fn message(text: &str) -> Event {
    Event::new(t(1, 12), EventPayload::UserMessage { text: text.into() }).with_scope(
        Some("s1".into()),
        Some("ana".into()),
        None,
    )
}

#[tokio::test]
async fn extensions_reach_each_other_through_services_and_failures_stay_isolated() {
    let (kernel, _dir_kernel) =
        kernel_with(registry(), "[extensions.counter]\n[extensions.consumer]\n").await;
    let consumer = CONSUMER.with(|cell| cell.borrow().clone()).unwrap();
    assert_eq!(
        kernel.call_tool(&scope(), "bump", json!({})).await,
        Ok(json!(1))
    );
    assert_eq!(
        kernel.call_tool(&scope(), "bump", Value::Null).await,
        Ok(json!(2))
    );

    for text in ["one", "panic", "two", "error", "three"] {
        kernel.publish(message(text)).await.unwrap();
    }
    kernel.settle().await;
    assert_eq!(*consumer.seen.lock().unwrap(), ["one", "two", "three"]);
    kernel.shutdown().await;

    // Without the provider, the consumer refuses to start and says why.
    let config = Config::parse("[extensions.consumer]\n", "test.toml").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let err = Kernel::builder(registry(), config)
        .virtual_clock(t(1, 12))
        .data_dir(dir.path())
        .start()
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(err, "extension `consumer`: the counter service is missing");
}

#[tokio::test]
async fn shutdown_drains_every_queued_event() {
    let (kernel, _dir_kernel) = kernel_with(
        registry(),
        "[extensions.counter]\n[extensions.consumer]\ndelay_ms = 5\n",
    )
    .await;
    let consumer = CONSUMER.with(|cell| cell.borrow().clone()).unwrap();
    for n in 0..40 {
        kernel.publish(message(&format!("m{n}"))).await.unwrap();
    }
    kernel.shutdown().await;
    let seen = consumer.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 40, "every queued event is handled before stop");
    assert_eq!(seen[39], "m39", "in order");
    assert!(
        kernel.publish(message("late")).await.is_err(),
        "closed after shutdown"
    );
}

#[tokio::test]
async fn an_agent_turn_without_a_model_says_how_to_configure_one() {
    let (kernel, _dir_kernel) = kernel_with(mnemo_devtools::dev_extensions(), "").await;
    let input = mnemo_kernel::host::TurnInput {
        user_id: "ana".into(),
        session_id: "s1".into(),
        chat_id: None,
        text: "hello".into(),
    };
    let err = kernel.run_turn(&input, &[]).await.unwrap_err().to_string();
    assert!(err.contains("no LLM is configured"), "{err}");
    assert!(err.contains("MNEMO_LLM_BASE_URL"), "{err}");
    assert_eq!(kernel.context().router().published("user_message"), 0);
    kernel.shutdown().await;
}

/// A kernel on the system clock with the `notes` digest due every second, with the scheduler or
/// without it.
async fn every_second_digest(scheduler: bool) -> (Kernel, tempfile::TempDir) {
    let config = Config::parse(
        "[extensions.notes]\ndigest_cron = \"* * * * * *\"\n",
        "test.toml",
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut builder =
        Kernel::builder(mnemo_devtools::dev_extensions(), config).data_dir(dir.path());
    if !scheduler {
        builder = builder.without_scheduler();
    }
    (builder.start().await.unwrap(), dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_system_clock_the_scheduler_runs_the_jobs_until_shutdown() {
    let (kernel, _dir) = every_second_digest(true).await;
    assert!(!kernel.is_virtual_clock());
    // An every-second job; allow a slow, shared machine plenty of time for the first run.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while kernel.job_runs().is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let runs = kernel.job_runs();
    assert!(!runs.is_empty(), "the scheduler never ran notes_digest");
    assert_eq!(runs[0].job, "notes_digest");
    assert!(runs[0].outcome.is_ok());
    kernel.shutdown().await;
    let after = kernel.job_runs().len();
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert_eq!(kernel.job_runs().len(), after, "no runs after shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_scheduler_no_job_runs_by_itself_but_one_can_be_run() {
    let (kernel, _dir) = every_second_digest(false).await;
    // Two every-second dues pass; the scheduler above runs the job well within this.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert_eq!(kernel.job_runs(), Vec::new(), "a job ran by itself");
    assert_eq!(kernel.jobs().len(), 1, "the job is still listed");
    let run = kernel.run_job("notes_digest").await.unwrap();
    assert!(run.outcome.is_ok(), "{run:?}");
    kernel.shutdown().await;
}

#[tokio::test]
async fn a_long_running_kernel_keeps_the_last_job_runs_and_counts_them_all() {
    let config = Config::parse(
        "[extensions.notes]\ndigest_cron = \"* * * * *\"\n",
        "test.toml",
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let start = Utc.with_ymd_and_hms(2026, 3, 1, 0, 0, 30).unwrap();
    let kernel = Kernel::builder(mnemo_devtools::dev_extensions(), config)
        .virtual_clock(start)
        .data_dir(dir.path())
        .start()
        .await
        .unwrap();
    // An every-minute job for a day: 1,440 runs, more than the kernel keeps.
    let runs = kernel
        .advance_to(start + chrono::Duration::days(1))
        .await
        .unwrap();
    assert_eq!(runs.len(), 1_440);
    let kept = kernel.job_runs();
    assert_eq!(kept.len(), mnemo_kernel::host::KEPT_JOB_RUNS);
    assert_eq!(kept.last(), runs.last(), "the newest run is kept");
    assert_eq!(
        kept.first(),
        runs.get(1_440 - mnemo_kernel::host::KEPT_JOB_RUNS)
    );
    // Without a store keeping a history, the history is the kernel's own, newest first.
    let newest: Vec<_> = runs.iter().rev().take(3).cloned().collect();
    assert_eq!(kernel.job_history(3).await, newest);
    let totals = kernel.job_totals("notes_digest").unwrap();
    assert_eq!((totals.runs, totals.failures), (1_440, 0));
    assert_eq!(kernel.job_totals("no_such_job"), None);
    kernel.shutdown().await;
}
