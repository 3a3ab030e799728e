//! The console's pages as maud templates: plain functions from what a page shows to its HTML.

use axum::http::StatusCode;
use maud::{html, Markup, PreEscaped, DOCTYPE};
use serde_json::Value;
use turnwise::protocol::*;

use super::diagram::{diagram, Marks};
use super::forms::{self, Errors, Field};
use super::views::{InstanceFilter, InstanceView, TypeRow, NO_WORKER_AFTER};
use super::{Frame, CSS, JS};

/// A form that was refused, shown again with its values and errors.
#[derive(Clone, Debug, Default)]
pub(crate) struct Pending {
    /// `message`, or the signal's name.
    target: Option<String>,
    value: Option<Value>,
    errors: Errors,
    message: Option<String>,
}

impl Pending {
    pub(crate) fn message(value: Option<Value>, errors: Errors, message: &str) -> Self {
        Pending {
            target: Some("message".into()),
            value,
            errors,
            message: Some(message.to_owned()),
        }
    }

    pub(crate) fn signal(name: &str, value: Option<Value>, errors: Errors, message: &str) -> Self {
        Pending {
            target: Some(format!("signal:{name}")),
            value,
            errors,
            message: Some(message.to_owned()),
        }
    }

    fn for_target(&self, target: &str) -> (Option<&Value>, Errors, Option<&str>) {
        if self.target.as_deref() == Some(target) {
            (
                self.value.as_ref(),
                self.errors.clone(),
                self.message.as_deref(),
            )
        } else {
            (None, Errors::new(), None)
        }
    }
}

pub(super) fn layout(frame: Option<&Frame>, title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · turnwise" }
                link rel="stylesheet" href=(CSS);
                script src=(JS) defer {}
            }
            body {
                header {
                    a.brand href="/console" { "turnwise" }
                    @if let Some(frame) = frame {
                        nav {
                            a href="/console" { "Workflows" }
                            a href="/console/instances" { "Instances" }
                            a href="/console/new" { "New instance" }
                            a href="/console/schemas" { "Schemas" }
                            @if frame.login {
                                form.inline method="post" action="/console/logout" {
                                    (csrf_field(frame))
                                    button.link type="submit" { "Log out" }
                                }
                            }
                        }
                    }
                }
                main { h1 { (title) } (body) }
            }
        }
    }
}

pub(super) fn csrf_field(frame: &Frame) -> Markup {
    html! { input type="hidden" name=(super::auth::CSRF_FIELD) value=(frame.csrf); }
}

/// A refusal as a page.
pub(crate) fn failure(status: StatusCode, message: &str) -> Markup {
    layout(
        None,
        status.canonical_reason().unwrap_or("Refused"),
        html! {
            p.error role="alert" { (message) }
            p { a href="/console" { "Back to the console" } }
        },
    )
}

/// The login form.
pub(crate) fn login(csrf: &str, note: Option<&str>) -> Markup {
    layout(
        None,
        "Log in",
        html! {
            @if let Some(note) = note { p.error role="alert" { (note) } }
            form.login method="post" action=(super::LOGIN) {
                input type="hidden" name=(super::auth::CSRF_FIELD) value=(csrf);
                label for="token" { "API token" }
                input id="token" type="password" name="token" autocomplete="current-password" required;
                button type="submit" { "Log in" }
            }
            p.help { "The token the server was started with (" code { "--api-token" } " or "
                code { "TURNWISE_API_TOKEN" } "). It is kept in an HttpOnly cookie for this console." }
        },
    )
}

// ---- formatting -----------------------------------------------------------------------------

/// A duration in ms, short: `850 ms`, `4.2 s`, `3 min 5 s`, `2 h 4 min`, `3 d 2 h`.
pub(crate) fn duration(ms: i64) -> String {
    let ms = ms.max(0);
    let s = ms / 1000;
    match ms {
        0..1_000 => format!("{ms} ms"),
        1_000..60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        60_000..3_600_000 => format!("{} min {} s", s / 60, s % 60),
        3_600_000..86_400_000 => format!("{} h {} min", s / 3600, s / 60 % 60),
        _ => format!("{} d {} h", s / 86_400, s / 3600 % 24),
    }
}

/// A time in ms since the epoch, as `YYYY-MM-DD HH:MM:SS` UTC.
pub(crate) fn timestamp(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

fn when(ms: i64, now: i64) -> Markup {
    let rel = if ms <= now {
        format!("{} ago", duration(now - ms))
    } else {
        format!("in {}", duration(ms - now))
    };
    html! { time title=(format!("{} UTC", timestamp(ms))) { (rel) } }
}

/// Pretty JSON in a `pre`.
pub(crate) fn json_block(v: &Value) -> Markup {
    html! { pre.json { (serde_json::to_string_pretty(v).unwrap_or_default()) } }
}

pub(super) fn status_badge(s: &str) -> Markup {
    html! { span class=(format!("status s-{s}")) data-status=(s) { (s) } }
}

pub(super) fn url(path: &str, pairs: &[(&str, &str)]) -> String {
    let q: String = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs.iter().filter(|(_, v)| !v.is_empty()))
        .finish();
    if q.is_empty() {
        path.to_owned()
    } else {
        format!("{path}?{q}")
    }
}

pub(super) fn instance_link(id: &str) -> String {
    url("/console/instance", &[("id", id)])
}

// ---- workflows ------------------------------------------------------------------------------

pub(crate) fn workflows(
    frame: &Frame,
    base: &str,
    rows: &[TypeRow],
    stats: Option<&RunStats>,
    now: i64,
    complete: bool,
) -> Markup {
    let stale = NO_WORKER_AFTER.as_millis() as i64;
    layout(
        Some(frame),
        "Workflows",
        html! {
            @if let Some(stats) = stats { (runs_by_hour(stats)) }
            @if rows.is_empty() {
                p { "No workflow type is registered and no instance exists yet. Start a worker: it registers its workflows' schemas with this server." }
            }
            @if !complete { p.help { "Counts over the first 10 000 instances." } }
            table.list id="workflows" {
                thead { tr { th { "Type" } th { "Version" } th { "Instances" } th { "By status" } th { "Lag" } th {} } }
                tbody {
                    @for r in rows {
                        @let no_worker = r.running == 0 && r.ready_since_ms.is_some_and(|s| now - s >= stale);
                        tr data-type=(r.workflow_type) data-version=(r.version) {
                            td { a href=(url("/console/instances", &[("type", &r.workflow_type), ("version", &r.version)])) { (r.workflow_type) } }
                            td { (r.version) @if !r.registered { " " span.muted title="no worker has registered schemas for it" { "(no schemas)" } } }
                            td { (r.instances) }
                            td {
                                @for (s, n) in &r.by_status {
                                    a.count href=(url("/console/instances", &[("type", &r.workflow_type), ("version", &r.version), ("status", s)])) {
                                        (status_badge(s)) " " (n)
                                    }
                                    " "
                                }
                            }
                            td.lag { @match r.oldest_ready_ms { Some(t) => (duration(now - t)), None => "—" } }
                            td {
                                @if no_worker {
                                    div.warning.no-worker role="alert" {
                                        strong { "No worker" }
                                        " — a message has been ready for " (duration(now - r.ready_since_ms.unwrap_or(now)))
                                        " and no turn runs. Start a worker program that registers " code { (r.workflow_type) " " (r.version) } " with this server; in Rust:"
                                        pre { "Worker::new(Http::connect(\"" (base) "\", std::env::var(\"TURNWISE_API_TOKEN\").ok())?)\n    .register(" (r.workflow_type.replace('-', "_")) ")\n    .run()\n    .await" }
                                        "A Python LBB worker connects as " code { "docs/http.md" } " §9 shows."
                                    }
                                }
                                a.button href=(url("/console/new", &[("type", &r.workflow_type), ("version", &r.version)])) { "New instance" }
                                " " a.versions href=(url("/console/versions", &[("type", &r.workflow_type)])) { "Versions" }
                            }
                        }
                    }
                }
            }
        },
    )
}

// ---- instances ------------------------------------------------------------------------------

pub(crate) fn instances(
    frame: &Frame,
    filter: &InstanceFilter,
    list: &[WorkflowInstance],
    next: Option<&str>,
    now: i64,
) -> Markup {
    let f = |o: &Option<String>| o.clone().unwrap_or_default();
    let (t, v, s, p) = (
        f(&filter.workflow_type),
        f(&filter.version),
        f(&filter.status),
        f(&filter.prefix),
    );
    layout(
        Some(frame),
        "Instances",
        html! {
            form.filters method="get" action="/console/instances" {
                label { "Type " input name="type" value=(t); }
                label { "Version " input name="version" value=(v) size="6"; }
                label { "Status "
                    select name="status" {
                        option value="" { "any" }
                        @for st in InstanceStatus::ALL { option value=(st) selected[s == *st] { (st) } }
                    }
                }
                label { "Id prefix " input name="prefix" value=(p); }
                button type="submit" { "Filter" }
            }
            @if list.is_empty() { p { "No instance matches." } }
            table.list id="instances" {
                thead { tr { th { "Id" } th { "Type" } th { "Version" } th { "Status" } th { "Pending" } th { "Done" } th { "Updated" } } }
                tbody {
                    @for i in list {
                        tr {
                            td { a href=(instance_link(&i.id)) { (i.id) } }
                            td { (i.workflow_type) } td { (i.version) }
                            td { (status_badge(i.status.as_str())) }
                            td { (i.pending_messages) } td { (i.completed_turns) }
                            td { (when(i.updated_at_ms, now)) }
                        }
                    }
                }
            }
            @if let Some(next) = next {
                a.button rel="next" href=(url("/console/instances", &[("type", &t), ("version", &v), ("status", &s), ("prefix", &p), ("after", next)])) { "Next page" }
            }
        },
    )
}

// ---- one instance ---------------------------------------------------------------------------

/// The part of the instance page that the script refreshes: status, Running line, operation,
/// waits.
pub(crate) fn live(inst: &WorkflowInstance, now: i64) -> Markup {
    let head = inst.current_turn.as_deref();
    html! {
        div id="live" data-status=(inst.status.as_str())
            data-key=(format!("{}/{}", inst.status.as_str(), head.map_or(String::new(), |t| format!("{}/{}", t.number, t.status.as_str())))) {
            p { "Status " (status_badge(inst.status.as_str()))
                " · " (inst.pending_messages) " pending · " (inst.completed_turns) " done" }
            @if let Some(t) = head {
                p { "Turn " (t.number) " " (status_badge(t.status.as_str())) " · attempt " (t.attempt)
                    @if let Some(w) = &t.worker { " · worker " code { (w) } } }
                @if let Some(p) = t.progress.as_ref().or(inst.progress.as_ref()) {
                    (running_line(p, t, now))
                }
                @if let Some(op) = &t.operation {
                    dl.operation {
                        dt { "Operation" } dd { code { (op.key) } " (" (op.kind.as_str()) ")" }
                        dt { "Attempt" } dd { (op.attempt) }
                        dt { "Deadline" } dd { (when(op.deadline_ms, now)) }
                        dt { "Last heartbeat" } dd { (when(op.last_heartbeat_ms, now)) }
                        @if !op.checkpoint.is_null() { dt { "Cursor" } dd { code { (op.checkpoint.to_string()) } } }
                    }
                }
                (waits(t, now))
                @if let Some(e) = &t.error { p.error { "Last error: " (e) } }
            } @else {
                p.muted { "Nothing pending." }
            }
        }
    }
}

/// The Running line: phase, `done of total unit`, a bar, elapsed.
fn running_line(p: &Progress, t: &WorkflowTurn, now: i64) -> Markup {
    let started = t
        .operation
        .as_ref()
        .map(|o| o.started_at_ms)
        .or(t.run.as_ref().map(|r| r.started_at_ms));
    let unit = p.unit.as_deref().unwrap_or("");
    let pct = p
        .total
        .filter(|t| *t > 0)
        .map(|total| (p.done.min(total) * 100 / total) as u8);
    html! {
        div.running id="running" data-done=(p.done) data-total=[p.total] {
            strong { "Running" } " · " span.phase { (p.phase) } " · "
            span.count { (p.done) @if let Some(total) = p.total { " of " (total) } @if !unit.is_empty() { " " (unit) } }
            @if let Some(s) = started { " · " span.elapsed { (duration(now - s)) " elapsed" } }
            @if let Some(pct) = pct {
                div.bar role="progressbar" aria-valuenow=(pct) aria-valuemin="0" aria-valuemax="100" {
                    div.fill style=(format!("width: {pct}%")) {}
                }
            }
        }
    }
}

fn waits(t: &WorkflowTurn, now: i64) -> Markup {
    let signal = waiting_signal(t);
    let sleeping = t.status == TurnStatus::Waiting
        && t.steps.last().is_some_and(|s| {
            s.kind == CheckpointKind::Sleep && s.wake_at_ms.is_some_and(|w| w > now)
        });
    html! {
        @if let Some((name, deadline)) = &signal {
            p.wait { "Waiting for signal " code { (name) }
                @if let Some(d) = deadline { " · deadline " (when(*d, now)) } }
        }
        @if sleeping {
            @if let Some(w) = t.steps.last().and_then(|s| s.wake_at_ms) {
                p.wait { "Sleeping · wakes " (when(w, now)) }
            }
        }
        @if let Some(w) = &t.wait {
            p.wait { "Waiting " @if let Some(r) = w.reason { "(" (r.as_str()) ") " } "· ready " (when(w.until_ms, now)) }
        }
        @if t.status == TurnStatus::Queued && t.ready_at_ms > now {
            p.wait { "Retrying " (when(t.ready_at_ms, now)) " (attempt " (t.attempt + 1) ")" }
        }
    }
}

/// The signal a waiting turn waits for, and its deadline.
fn waiting_signal(t: &WorkflowTurn) -> Option<(String, Option<i64>)> {
    if t.status != TurnStatus::Waiting {
        return None;
    }
    let last = t.steps.last()?;
    (last.kind == CheckpointKind::Signal && last.output.is_null()).then(|| {
        (
            last.signal_name.clone().unwrap_or_default(),
            last.wake_at_ms,
        )
    })
}

fn generated_id(prefix: &str) -> String {
    format!("{prefix}-{}", &super::auth::new_id()[..20])
}

fn control_button(
    frame: &Frame,
    id: &str,
    action: &str,
    turn: Option<u64>,
    label: &str,
    confirm: &str,
) -> Markup {
    html! {
        form.inline.control method="post" action="/console/control" data-confirm=(confirm) {
            (csrf_field(frame))
            input type="hidden" name="workflow_id" value=(id);
            input type="hidden" name="action" value=(action);
            @if let Some(t) = turn { input type="hidden" name="turn" value=(t); }
            button type="submit" data-action=(action) { (label) }
        }
    }
}

fn form_errors(message: Option<&str>) -> Markup {
    html! {
        @if let Some(m) = message { p.error.form-error role="alert" { (m) } }
    }
}

/// The instance page: its header and live summary, then one section per job (see the
/// `instance_*` functions below, in the page's order).
pub(crate) fn instance(frame: &Frame, v: &InstanceView, pending: &Pending) -> Markup {
    let inst = &v.instance;
    let now = v.now_ms;
    let id = inst.id.as_str();
    layout(
        Some(frame),
        &format!("Instance {id}"),
        html! {
            p.meta { code { (inst.workflow_type) } " " code { (inst.version) } " · created " (when(inst.created_at_ms, now))
                " · " a href=(url("/console/schemas", &[])) { "schemas" }
                " · " a href=(url("/console/versions", &[("type", &inst.workflow_type)])) { "versions" } }
            section id="live-section" data-live=(url(super::LIVE, &[("id", id)])) {
                (live(inst, now))
            }
            (instance_suspension(frame, inst, v.schema.as_ref()))
            (instance_actions(frame, inst, now))
            (instance_signals(frame, v, pending))
            (instance_message(frame, v, pending))
            section id="state" {
                h2 { "State" }
                (json_block(&inst.state))
            }
            (instance_queue(v))
            (instance_turns(v))
            (instance_runs(v))
            (instance_events(inst, now))
        },
    )
}

/// A head turn suspended by a replay mismatch: its report (the version, the saved steps and
/// where the code left them, what it called instead, where) and the ways out: restart from
/// the last accepted step or from scratch, fork (cancel is among the actions).
fn instance_suspension(
    frame: &Frame,
    inst: &WorkflowInstance,
    schema: Option<&SchemaDocument>,
) -> Markup {
    let Some(t) = inst
        .current_turn
        .as_deref()
        .filter(|t| t.status == TurnStatus::Suspended)
    else {
        return html! {};
    };
    let id = inst.id.as_str();
    let report = t.mismatch.as_ref();
    let position = report.map_or(usize::MAX, |r| r.position as usize);
    html! {
        section.suspension id="suspension" {
            h2 { "Turn " (t.number) " is suspended by a replay mismatch" }
            div.beside {
            div.beside-report {
            @if let Some(r) = report {
                p.warning id="mismatch-message" { (r.message) }
                dl.report {
                    dt { "Version" } dd { code { (r.version) } }
                    dt { "Diverged at" } dd { "position " (r.position) }
                    dt { "The code called instead" } dd id="mismatch-found" {
                        @match &r.found {
                            Some(found) => code { (found.describe()) },
                            None => "nothing: the handler returned",
                        }
                    }
                    dt { "Where" } dd id="mismatch-at" {
                        @match &r.at { Some(at) => code { (at) }, None => span.muted { "not known (the version has no manifest)" } }
                    }
                }
                table.saved id="mismatch-saved" {
                    thead { tr { th { "#" } th { "Saved step" } th { "" } } }
                    tbody {
                        @for (i, entry) in r.saved.iter().enumerate() {
                            tr.accepted[i < position] {
                                td { (i) } td { code { (entry.describe()) } }
                                td { @if i < position { "replayed" } @else if i == position { "diverged here" } @else { "" } }
                            }
                        }
                    }
                }
            } @else if let Some(e) = &t.error {
                p.warning { (e) }
            }
            }
            (suspension_diagram(report, schema))
            }
            div.ways-out {
                @for (from, label, confirm) in [
                    ("last_accepted", "Restart from last accepted step", "Run the turn again on this version, keeping the steps saved before the divergence?"),
                    ("scratch", "Restart from scratch", "Run the turn again from the top on this version, dropping its saved steps?"),
                ] {
                    form.inline.control method="post" action="/console/restart" data-confirm=(confirm) {
                        (csrf_field(frame))
                        input type="hidden" name="workflow_id" value=(id);
                        input type="hidden" name="turn" value=(t.number);
                        input type="hidden" name="from" value=(from);
                        button type="submit" data-action=(format!("restart-{from}")) { (label) }
                    }
                }
                form.inline.control method="post" action="/console/fork" data-confirm="Fork this instance into a new one with its state and unfinished messages?" {
                    (csrf_field(frame))
                    input type="hidden" name="workflow_id" value=(id);
                    label.idem { "New id " input name="new_id" value=(format!("{id}-fork")) required; }
                    button type="submit" data-action="fork" { "Fork" }
                }
            }
        }
    }
}

/// The diagram of the suspended turn's version beside its report, the saved prefix marked
/// replayed and the call at the divergence marked.
fn suspension_diagram(report: Option<&MismatchReport>, schema: Option<&SchemaDocument>) -> Markup {
    let manifest = schema
        .and_then(|s| s.manifest.as_ref())
        .filter(|m| report.is_none_or(|r| r.version == m.version));
    let Some(m) = manifest else {
        return html! { div.beside-diagram { p.muted { "No replay manifest is registered for this version: there is no diagram." } } };
    };
    let marks = report.map_or_else(Marks::default, |r| {
        let position = r.position as usize;
        Marks {
            replayed: r.saved.iter().take(position).cloned().collect(),
            diverged: r.saved.get(position).cloned(),
            found: r.found.clone(),
            at: r.at.clone(),
        }
    });
    html! {
        div.beside-diagram id="mismatch-diagram" {
            h3 { "The calls of " code { (m.version) } " " a href=(url("/console/versions", &[("type", &m.name)])) { "(versions)" } }
            (diagram(&m.grammar, &marks))
        }
    }
}

/// What operators and the engine did to the instance outside its turns, newest first.
fn instance_events(inst: &WorkflowInstance, now: i64) -> Markup {
    html! {
        @if !inst.events.is_empty() {
            section id="events" {
                h2 { "Events" }
                table {
                    thead { tr { th { "When" } th { "What" } th { "Turn" } th { "By" } th { "Detail" } } }
                    tbody {
                        @for e in inst.events.iter().rev() {
                            tr {
                                td { (when(e.at_ms, now)) } td { code { (e.action) } }
                                td { @if let Some(n) = e.turn { (n) } }
                                td { @if let Some(by) = &e.by { (by) } }
                                td { @if let Some(d) = &e.detail { (d) } }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The instance's controls: pause or resume, what its current turn allows, and delete.
fn instance_actions(frame: &Frame, inst: &WorkflowInstance, now: i64) -> Markup {
    let id = inst.id.as_str();
    html! {
        section.actions {
            h2 { "Actions" }
            @if inst.status == InstanceStatus::Paused {
                (control_button(frame, id, "resume", None, "Resume", "Resume this instance?"))
            } @else {
                (control_button(frame, id, "pause", None, "Pause", "Pause this instance? No turn is claimed until it is resumed."))
            }
            @if let Some(t) = inst.current_turn.as_deref() {
                @if t.status == TurnStatus::Failed {
                    (control_button(frame, id, "retry", Some(t.number), "Retry turn", "Run the failed turn again?"))
                    (control_button(frame, id, "skip", Some(t.number), "Skip turn", "Move the failed turn to history and go on?"))
                }
                @if !t.status.is_outcome() {
                    (control_button(frame, id, "cancel_turn", Some(t.number), "Cancel turn", "Cancel this turn? State is left unchanged."))
                }
                @if t.wait.is_some() || (t.status == TurnStatus::Queued && t.ready_at_ms > now) {
                    (control_button(frame, id, "wake", None, "Wake", "Make the waiting turn ready now?"))
                }
            }
            form.inline.control method="post" action="/console/delete" data-confirm=(format!("Delete {id} with its inbox and history? This cannot be undone.")) {
                (csrf_field(frame))
                input type="hidden" name="workflow_id" value=(id);
                button.danger type="submit" data-action="delete" { "Delete" }
            }
        }
    }
}

/// One form per signal of the instance's schema, to its current turn ("Respond" for the one
/// the turn waits for).
fn instance_signals(frame: &Frame, v: &InstanceView, pending: &Pending) -> Markup {
    let inst = &v.instance;
    let id = inst.id.as_str();
    let head = inst.current_turn.as_deref();
    let waited = head.and_then(waiting_signal).map(|(n, _)| n);
    html! {
        @if let (Some(t), Some(doc)) = (head, v.schema.as_ref()) {
            @for (name, schema) in &doc.signals {
                @let (sv, se, sm) = pending.for_target(&format!("signal:{name}"));
                @let field = Field::from_schema(schema);
                section.signal {
                    h2 { @if waited.as_deref() == Some(name.as_str()) { "Respond: " } @else { "Send a signal: " } code { (name) } " to turn " (t.number) }
                    form.generated method="post" action="/console/signal" novalidate data-signal=(name) {
                        (csrf_field(frame))
                        input type="hidden" name="workflow_id" value=(id);
                        input type="hidden" name="turn" value=(t.number);
                        input type="hidden" name="name" value=(name);
                        (form_errors(sm))
                        (forms::render(&field, forms::ROOT, "Signal value", sv, &se))
                        label.idem { "Signal id " input name="signal_id" value=(generated_id("sig")); }
                        button type="submit" { "Send signal" }
                    }
                }
            }
        }
    }
}

/// The form of a message, generated from the instance's message schema.
fn instance_message(frame: &Frame, v: &InstanceView, pending: &Pending) -> Markup {
    let id = v.instance.id.as_str();
    let msg_schema = v.schema.as_ref().map_or(Value::Null, |d| d.message.clone());
    let (msg_value, msg_errors, msg_message) = pending.for_target("message");
    html! {
        section.message {
            h2 { "Send message" }
            form.generated id="message-form" method="post" action="/console/message" novalidate {
                (csrf_field(frame))
                input type="hidden" name="workflow_id" value=(id);
                (form_errors(msg_message))
                (forms::render(&Field::from_schema(&msg_schema), forms::ROOT, "Message", msg_value, &msg_errors))
                label.idem { "Message id " input name="message_id" value=(generated_id("msg")); }
                label.idem { "Note " input name="note" placeholder="optional, kept in the origin"; }
                button type="submit" { "Send message" }
            }
        }
    }
}

/// The instance's inbox, oldest or newest first, each message's payload behind a link.
fn instance_queue(v: &InstanceView) -> Markup {
    let id = v.instance.id.as_str();
    let now = v.now_ms;
    let mut entries: Vec<&InboxMessage> = v.queue.messages.iter().collect();
    if v.newest_first {
        entries.reverse();
    }
    html! {
        section id="queue" {
            h2 { "Queue" }
            p { @if v.newest_first { a href=(instance_link(id)) { "oldest first" } " · newest first" }
                @else { "oldest first · " a href=(url("/console/instance", &[("id", id), ("queue", "newest")])) { "newest first" } } }
            @if entries.is_empty() { p.muted { "Empty." } }
            table.list {
                thead { tr { th { "Turn" } th { "Message id" } th { "Status" } th { "Origin" } th { "Age" } th { "Size" } th { "Payload" } } }
                tbody {
                    @for m in entries {
                        tr {
                            td { (m.turn) } td { code { (m.message_id) } }
                            td { (status_badge(m.status.as_str())) }
                            td { (m.origin.as_ref().map_or("—", |o| o.kind.as_str())) }
                            td { (duration(now - m.received_at_ms)) }
                            td { (m.message_bytes) " B" }
                            td { details.payload data-src=(url("/console/instance/payload", &[("id", id), ("turn", &m.turn.to_string())])) {
                                summary { "open" }
                                a href=(url("/console/instance/payload", &[("id", id), ("turn", &m.turn.to_string())])) { "view the message" }
                            } }
                        }
                    }
                }
            }
        }
    }
}

/// The instance's finished turns, a page of them.
fn instance_turns(v: &InstanceView) -> Markup {
    let id = v.instance.id.as_str();
    html! {
        section id="turns" {
            h2 { "Turns" }
            @if v.turns.is_empty() { p.muted { "No finished turn yet." } }
            @for t in &v.turns { (turn_view(t)) }
            p.paging {
                @if let Some(n) = v.newer { a href=(url("/console/instance", &[("id", id), ("before", &n.to_string())])) { "← newer" } " " }
                @if let Some(o) = v.older { a href=(url("/console/instance", &[("id", id), ("before", &o.to_string())])) { "older →" } }
            }
        }
    }
}

/// The instance's runs, newest first, a page of them.
fn instance_runs(v: &InstanceView) -> Markup {
    let id = v.instance.id.as_str();
    let now = v.now_ms;
    html! {
        section id="runs" {
            h2 { "Runs" }
            p.help { "Every attempt of every turn, newest first: a retry is a new run; a turn that sleeps or waits for a signal keeps its run, which resumes." }
            @if v.runs.runs.is_empty() { p.muted { @if v.runs_later { "No older run." } @else { "No run yet." } } }
            @else {
                table.list {
                    thead { tr { th { "Run" } th { "Turn" } th { "Attempt" } th { "Origin" } th { "Started" } th { "Took" } th { "Outcome" } th { "Turn after" } th { "Inbox before → after" } th { "Finished" } th { "Usage" } th { "Error" } } }
                    tbody {
                        @for r in &v.runs.runs {
                            tr.run data-run=(r.id) data-turn=(r.turn) data-attempt=(r.attempt) data-outcome=(r.outcome.as_str()) {
                                td { a href=(run_link(&r.id)) { code { (r.id) } } }
                                td { (r.turn) } td { (r.attempt) }
                                td { (r.origin.as_ref().map_or("—", |o| o.kind.as_str())) }
                                td { (when(r.started_at_ms, now)) }
                                td { (duration(r.ended_at_ms - r.started_at_ms)) }
                                td { (status_badge(r.outcome.as_str())) }
                                td { (status_badge(r.turn_status.as_str())) }
                                td { (r.queue_before) " → " (r.queue_after) }
                                td { @if let Some(f) = &r.finished { (finished(f)) } @else { "—" } }
                                td { @if let Some(u) = &r.usage { (usage(u)) } }
                                td { @if let Some(e) = &r.error { span.error { (e) } } }
                            }
                        }
                    }
                }
            }
            p.paging {
                @if v.runs_later { a href=(url("/console/instance", &[("id", id)])) { "← newest runs" } " " }
                @if let Some(c) = &v.runs.next_cursor { a rel="next" href=(url("/console/instance", &[("id", id), ("runs", c)])) { "older runs →" } }
            }
        }
    }
}

fn run_link(id: &str) -> String {
    url("/console/run", &[("run", id)])
}

/// What a run finished: `done unit` (of `total`) in `phase`.
fn finished(f: &RunFinished) -> Markup {
    html! {
        (f.done)
        @if let Some(t) = f.total { " of " (t) }
        @if let Some(u) = &f.unit { " " (u) }
        " · " span.phase { (f.phase) }
    }
}

/// A run's usage, counter by counter.
fn usage(u: &RunUsage) -> Markup {
    let counters = [
        ("calls", u.calls),
        ("errors", u.errors),
        ("tokens in", u.tokens_in),
        ("tokens out", u.tokens_out),
    ];
    html! {
        span.usage {
            @for (name, n) in counters { @if let Some(n) = n { (name) " " (n) "; " } }
            @if let Some(c) = u.cost_micro_usd { (dollars(c)) }
        }
    }
}

/// A run's results report: its counts by outcome and the inputs it lists.
fn run_results(results: &RunResultsReport) -> Markup {
    let counts = results.counts.clone().unwrap_or_default();
    let by_outcome = [
        ("written", counts.written),
        ("review", counts.review),
        ("no_value", counts.no_value),
        ("failed", counts.failed),
        ("duplicate", counts.duplicate),
    ];
    html! {
        section id="results" {
            h2 { "Results" }
            @if results.counts.is_some() {
                table.list.counts {
                    tbody {
                        @for (name, n) in by_outcome {
                            @if let Some(n) = n { tr data-outcome=(name) { th { (name) } td { (n) } } }
                        }
                    }
                }
            }
            @if let Some(inputs) = &results.inputs {
                table.list.inputs {
                    thead { tr { th { "Outcome" } th { "Input" } th { "Cost" } th { "Error" } th { "Values" } } }
                    tbody {
                        @for i in inputs {
                            tr {
                                td { (status_badge(i.outcome.as_str())) }
                                td {
                                    @if let Some(l) = &i.label { (l) " " }
                                    @if let Some(iri) = &i.iri { code { (iri) } }
                                }
                                td { @if let Some(c) = i.cost_micro_usd { (dollars(c)) } }
                                td { @if let Some(e) = &i.error { span.error { (e) } } }
                                td { @if let Some(v) = &i.values { (json_block(&Value::Array(v.clone()))) } }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Millionths of a US dollar, as dollars.
fn dollars(micro: u64) -> String {
    format!("${}.{:06}", micro / 1_000_000, micro % 1_000_000)
}

/// The Workflows page's strip: the runs of each of the last hours, by outcome.
fn runs_by_hour(stats: &RunStats) -> Markup {
    let most = stats
        .by_hour
        .iter()
        .map(|h| h.runs)
        .max()
        .unwrap_or(0)
        .max(1);
    let total: u64 = stats.by_hour.iter().map(|h| h.runs).sum();
    html! {
        section id="runs-by-hour" {
            h2 { "Runs by hour" }
            p.help { (total) @if total == 1 { " run" } @else { " runs" } " in the last " (stats.hours) " hours (by the hour they started, UTC)." }
            ol.hours {
                @for h in &stats.by_hour {
                    @let outcomes = h.outcomes.iter().map(|(k, n)| format!("{k} {n}")).collect::<Vec<_>>().join(", ");
                    li data-start=(h.start_ms) data-runs=(h.runs)
                        title=(format!("{} UTC: {} runs{}{}", timestamp(h.start_ms), h.runs, if outcomes.is_empty() { "" } else { " — " }, outcomes)) {
                        span.hbar style=(format!("height: {}%", h.runs * 100 / most)) {}
                        @if h.outcomes.get("failed").copied().unwrap_or(0) + h.outcomes.get("lease_lost").copied().unwrap_or(0) > 0 { span.bad {} }
                    }
                }
            }
        }
    }
}

// ---- one run --------------------------------------------------------------------------------

pub(crate) fn run(frame: &Frame, r: &WorkflowRun, now: i64) -> Markup {
    let origin = r
        .origin
        .as_ref()
        .map(|o| serde_json::to_value(o).unwrap_or(Value::Null));
    layout(
        Some(frame),
        &format!("Run {}", r.id),
        html! {
            p { "Instance " a href=(instance_link(&r.workflow_id)) { (r.workflow_id) } " · " (r.workflow_type) " " (r.version) }
            table.facts id="run" {
                tbody {
                    tr { th { "Turn" } td { (r.turn) " · message " code { (r.message_id) } } }
                    tr { th { "Attempt" } td { (r.attempt) } }
                    tr { th { "Origin" } td { (r.origin.as_ref().map_or("—", |o| o.kind.as_str())) } }
                    tr { th { "Worker" } td { (r.worker.as_deref().unwrap_or("—")) } }
                    tr { th { "Started" } td { (timestamp(r.started_at_ms)) " UTC · " (when(r.started_at_ms, now)) } }
                    tr { th { "Ended" } td { (timestamp(r.ended_at_ms)) " UTC" } }
                    tr { th { "Took" } td { (duration(r.ended_at_ms - r.started_at_ms)) } }
                    tr { th { "Outcome" } td.outcome { (status_badge(r.outcome.as_str())) } }
                    tr { th { "Turn after" } td { (status_badge(r.turn_status.as_str())) } }
                    tr { th { "Inbox before → after" } td { (r.queue_before) " → " (r.queue_after) } }
                    tr { th { "Finished" } td { @if let Some(f) = &r.finished { (finished(f)) } @else { "—" } } }
                    tr { th { "Usage" } td { @if let Some(u) = &r.usage { (usage(u)) } @else { "—" } } }
                    @if let Some(e) = &r.error { tr { th { "Error" } td { p.error { (e) } } } }
                }
            }
            @if let Some(o) = &origin { h2 { "Origin" } (json_block(o)) }
            @if let Some(sample) = &r.sample {
                h2 { "Sample" }
                ul.sample { @for name in sample { li { (name) } } }
            }
            @if let Some(counters) = &r.counters {
                h2 { "Counters" }
                table.list.counters { tbody { @for (name, n) in counters { tr { th { (name) } td { (n) } } } } }
            }
            h2 { "Steps" }
            @if r.steps.is_empty() { p.muted { "No step saved." } }
            ol.timeline.steps {
                @for s in &r.steps {
                    li { code { (s.key) } " " span.kind { (s.kind.as_str()) } " · " (when(s.at_ms, now)) }
                }
            }
            h2 { "Phases" }
            @if r.phases.is_empty() { p.muted { "No progress reported." } }
            @else {
                table.list.phases {
                    thead { tr { th { "Phase" } th { "Done" } th { "Took" } } }
                    tbody {
                        @for p in &r.phases {
                            tr {
                                td { (p.phase) }
                                td { (p.done) @if let Some(t) = p.total { " of " (t) } @if let Some(u) = &p.unit { " " (u) } }
                                td { (duration(p.ended_at_ms - p.started_at_ms)) }
                            }
                        }
                    }
                }
            }
            @if let Some(results) = &r.results { (run_results(results)) }
        },
    )
}

/// A finished turn: a summary that opens its steps as a timeline.
fn turn_view(t: &WorkflowTurn) -> Markup {
    let started = t.run.as_ref().map_or(t.created_at_ms, |r| r.started_at_ms);
    let took = t.finished_at_ms.map(|f| f - t.created_at_ms);
    let mut prev = started;
    let gaps: Vec<i64> = t
        .steps
        .iter()
        .map(|s| {
            let gap = s.at_ms - prev;
            prev = s.at_ms;
            gap
        })
        .collect();
    html! {
        details.turn data-turn=(t.number) {
            summary {
                "Turn " (t.number) " " (status_badge(t.status.as_str()))
                " · " code { (t.message_id) }
                @if let Some(o) = &t.origin { " · from " (o.kind) }
                @if let Some(d) = took { " · " (duration(d)) }
                @if let Some(f) = t.finished_at_ms { " · " time { (timestamp(f)) " UTC" } }
            }
            h3 { "Steps" }
            ol.timeline {
                @for (s, gap) in t.steps.iter().zip(&gaps) {
                    li {
                        code { (s.key) } " " span.kind { (s.kind.as_str()) }
                        " · " (duration(*gap))
                        @if let Some(n) = &s.signal_name { " · signal " code { (n) } }
                        @if let Some(d) = s.delay_ms {
                            @if s.kind == CheckpointKind::Sleep { " · slept " } @else { " · timeout " }
                            (duration(d as i64))
                        }
                        (json_block(&s.output))
                    }
                }
            }
            h3 { "Message" } (json_block(&t.message))
            h3 { "Result" } (json_block(&t.result))
            h3 { "State left" } (json_block(&t.state_after))
            @if let Some(e) = &t.error { h3 { "Error" } p.error { (e) } }
            @if let Some(sigs) = &t.signals {
                h3 { "Signals" }
                ul { @for s in sigs { li { code { (s.name) } " " code { (s.id) } " " (s.value.to_string()) } } }
            }
        }
    }
}

// ---- new instance and schemas ---------------------------------------------------------------

pub(crate) fn new_instance(
    frame: &Frame,
    docs: &[SchemaDocument],
    chosen: Option<(&str, &str)>,
    pending: &Pending,
) -> Markup {
    let (value, errors, message) = pending.for_target("message");
    let doc =
        chosen.and_then(|(t, v)| docs.iter().find(|d| d.workflow_type == t && d.version == v));
    layout(
        Some(frame),
        "New instance",
        html! {
            form.filters method="get" action="/console/new" {
                label { "Workflow "
                    select name="pick" data-pick="1" {
                        @for d in docs {
                            option value=(format!("{}|{}", d.workflow_type, d.version))
                                selected[chosen == Some((d.workflow_type.as_str(), d.version.as_str()))] {
                                (d.workflow_type) " " (d.version)
                            }
                        }
                    }
                }
                @if let Some((t, v)) = chosen { input type="hidden" name="type" value=(t); input type="hidden" name="version" value=(v); }
                noscript { " Type " input name="type"; " Version " input name="version" size="6"; }
                button type="submit" { "Choose" }
            }
            @if docs.is_empty() { p { "No workflow type is registered yet: start a worker first." } }
            @if let Some((t, v)) = chosen {
                form.generated id="create-form" method="post" action="/console/create" novalidate {
                    (csrf_field(frame))
                    input type="hidden" name="workflow_type" value=(t);
                    input type="hidden" name="version" value=(v);
                    (form_errors(message))
                    label.idem { "Instance id " input name="id" value=(generated_id(t)) required; }
                    h2 { "Initial state" }
                    @match doc {
                        Some(d) => (forms::render(&Field::from_schema(&d.state), forms::ROOT, "State", value, &errors)),
                        None => (forms::render(&Field::from_schema(&Value::Null), forms::ROOT, "State", value, &errors)),
                    }
                    details {
                        summary { "Options" }
                        label { "Lease (ms) " input name="lease_ms" inputmode="numeric"; }
                        label { "Max attempts " input name="max_attempts" inputmode="numeric"; }
                        label { "When out of attempts "
                            select name="on_exhausted" { option value="" { "block (default)" } option value="skip" { "skip" } } }
                    }
                    button type="submit" { "Create instance" }
                }
            }
        },
    )
}

pub(crate) fn schemas(frame: &Frame, docs: &[SchemaDocument]) -> Markup {
    layout(
        Some(frame),
        "Schemas",
        html! {
            @if docs.is_empty() { p { "No schemas are registered: a worker registers them when it starts." } }
            @for d in docs {
                section.schema data-type=(d.workflow_type) {
                    h2 { code { (d.workflow_type) } " " code { (d.version) } }
                    p { a.button download href=(url("/console/schemas/download", &[("type", &d.workflow_type), ("version", &d.version)])) { "Download JSON" } }
                    @for (label, s) in [("Message", &d.message), ("State", &d.state), ("Reply", &d.reply)] {
                        details { summary { (label) } (json_block(s)) }
                    }
                    @for (name, s) in &d.signals {
                        details { summary { "Signal " code { (name) } } (json_block(s)) }
                    }
                }
            }
            (PreEscaped(""))
        },
    )
}
