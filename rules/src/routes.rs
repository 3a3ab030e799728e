//! The route table: each operation's HTTP method and path.
//!
//! The server registers its handlers from this table and the HTTP client sends each call to
//! the route named here. No path has parameters of its own: an operation's arguments travel in
//! the query string (reads) or the JSON body (writes), so a path is used as it is, and the
//! caller appends the scope (`?graph=`, `?stack=`) and any query, percent-encoded.

use std::fmt;

/// An HTTP method the protocol uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Method {
    /// `GET`: a read, arguments in the query string.
    Get,
    /// `POST`: a write (or a claim), arguments in a JSON body.
    Post,
}

impl Method {
    /// The method as HTTP writes it: `GET` or `POST`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One operation of the HTTP protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Route {
    /// Create an instance.
    CreateInstance,
    /// List instances.
    ListInstances,
    /// Read one instance.
    GetInstance,
    /// Send a message to an instance (admit a turn).
    SendMessage,
    /// An instance's unfinished turns.
    InstanceInbox,
    /// Unfinished turns of a workflow type, across instances.
    TypeInbox,
    /// An instance's finished turns.
    History,
    /// One turn of an instance.
    Turn,
    /// Pause, resume, cancel or retry.
    Control,
    /// Delete an instance.
    Delete,
    /// Claim a ready turn (long-poll).
    Claim,
    /// Start (or resume) an operation at a step position.
    Operation,
    /// Report an operation's progress.
    Progress,
    /// Save a step's output or a sleep.
    Checkpoint,
    /// Wait for a signal at a step position.
    WaitSignal,
    /// Deliver a signal to a turn.
    Signal,
    /// Complete a turn.
    Complete,
    /// Fail an attempt.
    Fail,
    /// Extend a lease.
    Heartbeat,
    /// The server's status (served by the turnwise server; not a backend call).
    Status,
    /// List registered workflow schemas.
    ListSchemas,
    /// Register a workflow schema.
    RegisterSchema,
    /// Run summaries, newest first (of an instance, or of the namespace).
    Runs,
    /// One run summary.
    GetRun,
    /// Runs by hour.
    RunStats,
    /// Create a schedule on an instance (a turnwise extension).
    CreateSchedule,
    /// List schedules (a turnwise extension).
    ListSchedules,
    /// Read one schedule (a turnwise extension).
    GetSchedule,
    /// Pause, resume or delete a schedule (a turnwise extension).
    ControlSchedule,
    /// Run a turn suspended by a replay mismatch again, from its last accepted step or from
    /// scratch (a turnwise extension).
    RestartTurn,
    /// Fork an instance whose head turn is suspended into a new instance (a turnwise
    /// extension).
    ForkInstance,
    /// Which instances of a workflow type could move to another version (a turnwise
    /// extension).
    CompatLive,
    /// Move instances to another version of their workflow (a turnwise extension).
    UpgradeInstances,
}

impl Route {
    /// Every route, grouped by path.
    pub const ALL: [Route; 33] = [
        Route::CreateInstance,
        Route::ListInstances,
        Route::GetInstance,
        Route::SendMessage,
        Route::InstanceInbox,
        Route::TypeInbox,
        Route::History,
        Route::Turn,
        Route::Control,
        Route::Delete,
        Route::Claim,
        Route::Operation,
        Route::Progress,
        Route::Checkpoint,
        Route::WaitSignal,
        Route::Signal,
        Route::Complete,
        Route::Fail,
        Route::Heartbeat,
        Route::Status,
        Route::ListSchemas,
        Route::RegisterSchema,
        Route::Runs,
        Route::GetRun,
        Route::RunStats,
        Route::CreateSchedule,
        Route::ListSchedules,
        Route::GetSchedule,
        Route::ControlSchedule,
        Route::RestartTurn,
        Route::ForkInstance,
        Route::CompatLive,
        Route::UpgradeInstances,
    ];

    /// The route's method.
    pub const fn method(self) -> Method {
        use Route::*;
        match self {
            ListInstances | GetInstance | InstanceInbox | TypeInbox | History | Turn | Status
            | ListSchemas | Runs | GetRun | RunStats | ListSchedules | GetSchedule | CompatLive => {
                Method::Get
            }
            CreateInstance | SendMessage | Control | Delete | Claim | Operation | Progress
            | Checkpoint | WaitSignal | Signal | Complete | Fail | Heartbeat | RegisterSchema
            | CreateSchedule | ControlSchedule | RestartTurn | ForkInstance | UpgradeInstances => {
                Method::Post
            }
        }
    }

    /// The route's path, from the server's root (e.g. `/v1/workflows/turns/claim`).
    pub const fn path(self) -> &'static str {
        use Route::*;
        match self {
            CreateInstance | ListInstances => "/v1/workflows/instances",
            GetInstance => "/v1/workflows/instances/get",
            SendMessage => "/v1/workflows/instances/message",
            InstanceInbox => "/v1/workflows/instances/inbox",
            TypeInbox => "/v1/workflows/inbox",
            History => "/v1/workflows/instances/history",
            Turn => "/v1/workflows/instances/turn",
            Control => "/v1/workflows/instances/control",
            Delete => "/v1/workflows/instances/delete",
            Claim => "/v1/workflows/turns/claim",
            Operation => "/v1/workflows/turns/operation",
            Progress => "/v1/workflows/turns/progress",
            Checkpoint => "/v1/workflows/turns/checkpoint",
            WaitSignal => "/v1/workflows/turns/wait-signal",
            Signal => "/v1/workflows/turns/signal",
            Complete => "/v1/workflows/turns/complete",
            Fail => "/v1/workflows/turns/fail",
            Heartbeat => "/v1/workflows/turns/heartbeat",
            Status => "/v1/workflows/status",
            ListSchemas | RegisterSchema => "/v1/workflows/schemas",
            Runs => "/v1/workflows/instances/runs",
            GetRun => "/v1/workflows/instances/runs/get",
            RunStats => "/v1/workflows/instances/runs/stats",
            CreateSchedule | ListSchedules => "/v1/workflows/schedules",
            GetSchedule => "/v1/workflows/schedules/get",
            ControlSchedule => "/v1/workflows/schedules/control",
            RestartTurn => "/v1/workflows/turns/restart",
            ForkInstance => "/v1/workflows/instances/fork",
            CompatLive => "/v1/workflows/compat",
            UpgradeInstances => "/v1/workflows/instances/upgrade",
        }
    }

    /// The route of a method and path, if the protocol has one.
    pub fn find(method: Method, path: &str) -> Option<Route> {
        Route::ALL
            .into_iter()
            .find(|r| r.method() == method && r.path() == path)
    }

    /// Every path once, in the order of [`Route::ALL`] (two routes may share a path with
    /// different methods).
    pub fn paths() -> Vec<&'static str> {
        let mut out: Vec<&'static str> = Vec::with_capacity(Route::ALL.len());
        for r in Route::ALL {
            if !out.contains(&r.path()) {
                out.push(r.path());
            }
        }
        out
    }
}

impl fmt::Display for Route {
    /// `METHOD path`, e.g. `POST /v1/workflows/turns/claim`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.method(), self.path())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_method_and_path_names_one_route() {
        for (i, a) in Route::ALL.iter().enumerate() {
            assert_eq!(Route::find(a.method(), a.path()), Some(*a), "{a}");
            for b in &Route::ALL[i + 1..] {
                assert!(
                    (a.method(), a.path()) != (b.method(), b.path()),
                    "{a:?} and {b:?} share {a}"
                );
            }
        }
        assert_eq!(Route::find(Method::Get, "/v1/workflows/turns/claim"), None);
    }

    #[test]
    fn paths_are_absolute_without_parameters() {
        for r in Route::ALL {
            let p = r.path();
            assert!(p.starts_with("/v1/workflows/"), "{p}");
            assert!(
                !p.contains(['{', '}', '?', ' ']) && !p.ends_with('/'),
                "{p}"
            );
        }
    }

    #[test]
    fn shared_paths_are_listed_once() {
        let paths = Route::paths();
        assert_eq!(paths.len(), Route::ALL.len() - 3);
        assert_eq!(paths[0], "/v1/workflows/instances");
        assert!(paths.contains(&"/v1/workflows/schemas"));
        assert_eq!(Route::Claim.to_string(), "POST /v1/workflows/turns/claim");
        assert_eq!(Route::ListInstances.method(), Method::Get);
        assert_eq!(Route::CreateInstance.method(), Method::Post);
    }
}
