//! The Versions page of a workflow type (`/console/versions?type=<type>[&to=<version>]`): each
//! registered version's manifest as a [`diagram`](super::diagram), its shape hash and how many
//! instances run on it; the live compatibility report against a chosen version; and the
//! **Upgrade** action (`POST /console/upgrade`), whose answer the page shows after the redirect.

use std::collections::BTreeMap;

use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::Extension;
use maud::{html, Markup};
use turnwise::protocol::*;
use turnwise::Backend;

use super::actions::{read_form, required, BY};
use super::diagram::{diagram, Marks};
use super::pages::{csrf_field, instance_link, layout, status_badge, url};
use super::{engine, frame, html as page_html, see_other, Csrf, Fail, Frame, Login, Page};
use crate::AppState;

/// The most entries of each kind an upgrade's answer carries through the redirect.
const RESULTS_MAX: usize = 50;

/// What the page was asked for: the type, the target of the report, an upgrade's answer.
#[derive(Debug, Default)]
struct Ask {
    workflow_type: String,
    to: Option<String>,
    upgraded: Vec<String>,
    unchanged: Vec<String>,
    refused: Vec<String>,
    /// How many were upgraded, unchanged and refused (the lists carry at most
    /// [`RESULTS_MAX`] each).
    counts: [usize; 3],
    done: bool,
}

impl Ask {
    fn parse(query: Option<&str>) -> Self {
        let mut ask = Ask::default();
        for (k, v) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            let v = v.into_owned();
            match k.as_ref() {
                "type" => ask.workflow_type = v.trim().to_owned(),
                "to" if !v.is_empty() => ask.to = Some(v),
                "upgraded" => ask.upgraded.push(v),
                "unchanged" => ask.unchanged.push(v),
                "refused" => ask.refused.push(v),
                "n_upgraded" => ask.counts[0] = v.parse().unwrap_or(0),
                "n_unchanged" => ask.counts[1] = v.parse().unwrap_or(0),
                "n_refused" => ask.counts[2] = v.parse().unwrap_or(0),
                "done" => ask.done = true,
                _ => {}
            }
        }
        ask
    }
}

/// One version of the type: its registered document (if any) and its instance count.
pub(crate) struct VersionRow {
    version: String,
    doc: Option<SchemaDocument>,
    instances: u64,
}

/// The Versions page of a workflow type.
pub(super) async fn versions_page(
    State(state): State<AppState>,
    Extension(csrf): Extension<Csrf>,
    Extension(login): Extension<Login>,
    RawQuery(query): RawQuery,
) -> Page {
    let ask = Ask::parse(query.as_deref());
    if ask.workflow_type.is_empty() {
        return Err(Fail::new(
            StatusCode::BAD_REQUEST,
            "which workflow? The page needs `type`, as in /console/versions?type=order",
        ));
    }
    let rows = version_rows(&state, &ask.workflow_type).await?;
    if rows.is_empty() {
        return Err(Fail::new(
            StatusCode::NOT_FOUND,
            format!(
                "no workflow type `{}` is registered and no instance of it exists",
                ask.workflow_type
            ),
        ));
    }
    let registered = |to: &str| rows.iter().any(|r| r.version == to && r.doc.is_some());
    let report = match &ask.to {
        Some(to) if !registered(to) => Some(Err(format!(
            "version `{to}` of `{}` is not registered: a worker registers a version when it starts",
            ask.workflow_type
        ))),
        Some(to) => Some(
            engine(&state)
                .compat_live(LiveCompatQuery {
                    workflow_type: ask.workflow_type.clone(),
                    to_version: to.clone(),
                })
                .await
                .map_err(|e| e.to_string()),
        ),
        None => None,
    };
    Ok(page_html(render(
        &frame(&csrf, &login),
        &ask,
        &rows,
        report.as_ref(),
    )))
}

/// The versions of `workflow_type`: those registered and those instances run on.
async fn version_rows(state: &AppState, workflow_type: &str) -> Result<Vec<VersionRow>, Fail> {
    let engine = engine(state);
    let mut rows: BTreeMap<String, VersionRow> = BTreeMap::new();
    let docs = engine
        .schema_documents(Some(workflow_type), None)
        .await
        .unwrap_or_default();
    for doc in docs {
        let Ok(doc) = serde_json::from_value::<SchemaDocument>(doc) else {
            continue;
        };
        rows.insert(
            doc.version.clone(),
            VersionRow {
                version: doc.version.clone(),
                doc: Some(doc),
                instances: 0,
            },
        );
    }
    super::views::scan(engine, |inst| {
        if inst.workflow_type == workflow_type {
            rows.entry(inst.version.clone())
                .or_insert_with(|| VersionRow {
                    version: inst.version.clone(),
                    doc: None,
                    instances: 0,
                })
                .instances += 1;
        }
        true
    })
    .await?;
    Ok(rows.into_values().collect())
}

fn render(
    frame: &Frame,
    ask: &Ask,
    rows: &[VersionRow],
    report: Option<&Result<LiveCompat, String>>,
) -> Markup {
    let t = ask.workflow_type.as_str();
    layout(
        Some(frame),
        &format!("Versions of {t}"),
        html! {
            p.meta { a href=(url("/console/instances", &[("type", t)])) { "all instances of " code { (t) } } }
            @if ask.done { (results(ask)) }
            section id="compat" {
                h2 { "Live compatibility" }
                form.inline method="get" action="/console/versions" {
                    input type="hidden" name="type" value=(t);
                    label { "Move instances to " select name="to" {
                        @for r in rows { option value=(r.version) selected[ask.to.as_deref() == Some(r.version.as_str())] { (r.version) } }
                    } }
                    " " button type="submit" data-action="check" { "Check" }
                }
                @match report {
                    Some(Ok(c)) => (compat_report(frame, c)),
                    Some(Err(e)) => p.error role="alert" id="compat-error" { (e) },
                    None => p.help { "Choose a version to see which instances could move to it now." },
                }
            }
            @for r in rows { (version_section(t, r)) }
        },
    )
}

fn version_section(t: &str, r: &VersionRow) -> Markup {
    let manifest = r.doc.as_ref().and_then(|d| d.manifest.as_ref());
    html! {
        section.version id=(format!("version-{}", r.version)) data-version=(r.version) {
            h2 { "Version " code { (r.version) } }
            p.meta {
                a.count href=(url("/console/instances", &[("type", t), ("version", &r.version)])) {
                    (r.instances) " instance" @if r.instances != 1 { "s" } " on it"
                }
                @if let Some(m) = manifest {
                    " · shape hash " code.shape-hash { (m.shape_hash) }
                    @if !m.patches.is_empty() { " · patches " @for p in &m.patches { code { (p) } " " } }
                }
            }
            @match (manifest, &r.doc) {
                (Some(m), _) => (diagram(&m.grammar, &Marks::default())),
                (None, Some(_)) => p.muted { "Its worker registered schemas without a replay manifest: there is no diagram, and the live check pins its instances." },
                (None, None) => p.muted { "No worker has registered this version." },
            }
        }
    }
}

fn compat_report(frame: &Frame, c: &LiveCompat) -> Markup {
    let movable = c.counts.total() - c.counts.pinned;
    html! {
        div.report id="compat-report" data-to=(c.to_version) {
            p { (c.checked) " checked, " (c.on_target) " already on " code { (c.to_version) } "." }
            ul.verdicts id="verdict-counts" {
                @for v in Verdict::ALL {
                    li data-verdict=(v.as_str()) { span class=(format!("verdict v-{v}")) { (v.as_str()) } " " strong { (c.counts.of(v)) } }
                }
            }
            @if movable > 0 {
                form.inline.control method="post" action="/console/upgrade"
                    data-confirm=(format!("Move every instance that can move ({movable}) to {}?", c.to_version)) {
                    (csrf_field(frame))
                    input type="hidden" name="workflow_type" value=(c.workflow_type);
                    input type="hidden" name="to_version" value=(c.to_version);
                    button type="submit" data-action="upgrade-all" { "Upgrade " (movable) " to " (c.to_version) }
                }
            }
            @if !c.instances.is_empty() { (compat_table(frame, c)) }
        }
    }
}

fn compat_table(frame: &Frame, c: &LiveCompat) -> Markup {
    html! {
        table.list id="compat-instances" {
            thead { tr { th { "Instance" } th { "Version" } th { "Status" } th { "Verdict" } th { "Turn" } th { "Why" } th {} } }
            tbody {
                @for i in &c.instances {
                    tr data-id=(i.workflow_id) data-verdict=(i.verdict.as_str()) {
                        td { a href=(instance_link(&i.workflow_id)) { (i.workflow_id) } }
                        td { code { (i.version) } }
                        td { (status_badge(i.status.as_str())) }
                        td { span class=(format!("verdict v-{}", i.verdict)) { (i.verdict.as_str()) } }
                        td { @if let Some(t) = i.turn { (t) } @if let Some(n) = i.saved_steps { " (" (n) " saved)" } }
                        td.reason {
                            @if let Some(r) = &i.reason { (r.message) " " span.muted { "(" (r.code.as_str()) ")" } }
                            @if let Some(n) = &i.note { span.muted { (n) } }
                        }
                        td { @if i.verdict.is_movable() {
                            form.inline.control method="post" action="/console/upgrade"
                                data-confirm=(format!("Move {} to {}?", i.workflow_id, c.to_version)) {
                                (csrf_field(frame))
                                input type="hidden" name="workflow_type" value=(c.workflow_type);
                                input type="hidden" name="to_version" value=(c.to_version);
                                input type="hidden" name="workflow_id" value=(i.workflow_id);
                                button type="submit" data-action="upgrade" { "Upgrade" }
                            }
                        } }
                    }
                }
            }
        }
    }
}

/// An upgrade's answer, carried by the redirect.
fn results(ask: &Ask) -> Markup {
    html! {
        section.results id="upgrade-results" role="status" {
            h2 { "Upgrade" }
            @let [upgraded, unchanged, refused] = ask.counts;
            p { (upgraded) " upgraded, " (unchanged) " unchanged, " (refused) " refused." }
            ul {
                @for u in &ask.upgraded { li.upgraded { "upgraded " (u) } }
                @for u in &ask.unchanged { li.unchanged { "unchanged " (u) } }
                @for r in &ask.refused { li.refused { "refused " (r) } }
            }
            @let listed = ask.upgraded.len() + ask.unchanged.len() + ask.refused.len();
            @if upgraded + unchanged + refused > listed {
                p { "The first " (RESULTS_MAX) " of each are listed; the instance list has the rest." }
            }
        }
    }
}

/// `POST /console/upgrade`: move one instance (`workflow_id`) or every movable instance of
/// `workflow_type` to `to_version`, recorded as done by `console`; then the Versions page with
/// the answer.
pub(super) async fn upgrade(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Page {
    let form = read_form(&headers, &body)?;
    let t = required(&form, "workflow_type")?.to_owned();
    let to = required(&form, "to_version")?.to_owned();
    let id = form.get("workflow_id").filter(|s| !s.is_empty());
    let req = match id {
        Some(id) => UpgradeRequest {
            workflow_type: Some(t.clone()),
            ..UpgradeRequest::instance(id, &to)
        },
        None => UpgradeRequest::all_upgradable(&t, &to),
    };
    let answer = engine(&state).upgrade_instances(req.by(BY)).await?;
    let mut pairs = vec![
        ("type".to_owned(), t),
        ("to".to_owned(), to),
        ("done".to_owned(), "1".to_owned()),
        ("n_upgraded".to_owned(), answer.upgraded.len().to_string()),
        ("n_unchanged".to_owned(), answer.unchanged.len().to_string()),
        ("n_refused".to_owned(), answer.refused.len().to_string()),
    ];
    for u in answer.upgraded.iter().take(RESULTS_MAX) {
        let line = format!(
            "{}: {} → {} ({}, {})",
            u.workflow_id, u.from_version, u.to_version, u.action, u.verdict
        );
        pairs.push(("upgraded".into(), line));
    }
    for u in answer.unchanged.iter().take(RESULTS_MAX) {
        pairs.push((
            "unchanged".into(),
            format!("{u}: already on {}", answer.to_version),
        ));
    }
    for r in answer.refused.iter().take(RESULTS_MAX) {
        let line = format!(
            "{}: {} ({})",
            r.workflow_id, r.reason.message, r.reason.code
        );
        pairs.push(("refused".into(), line));
    }
    let q: String = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish();
    Ok(see_other(&format!("/console/versions?{q}#upgrade-results")))
}
