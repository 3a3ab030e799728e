//! Typed handles: start instances, send messages and signals, read state, operate.

use std::marker::PhantomData;
use std::sync::Arc;

use crate::protocol::backend::Backend;
use crate::protocol::error::{Error, Result};
use crate::protocol::*;
use crate::sdk::codec;
use crate::sdk::workflow::{Accepts, Signal, Workflow};

fn codec_error(e: codec::CodecError) -> Error {
    Error::Invalid {
        param: "value".into(),
        message: e.to_string(),
    }
}

/// Start and address instances of a workflow. Implemented for every [`Workflow`].
pub trait WorkflowExt: Workflow {
    /// Create the instance `id` with the workflow's initial state and options (idempotent: an
    /// existing instance of the same workflow and version is returned as it is).
    fn start<B: Backend + Clone + 'static>(
        &self,
        backend: &B,
        id: impl Into<String> + Send,
    ) -> impl std::future::Future<Output = Result<Handle<Self>>> + Send
    where
        Self::State: Default,
    {
        let backend: Arc<dyn Backend> = Arc::new(backend.clone());
        let id = id.into();
        let state = codec::encode_checked(
            &Self::Codec::default(),
            "initial state",
            &self.initial_state(),
            Self::state_eq(),
        );
        let options = self.options();
        async move {
            let (state, _) = state.map_err(codec_error)?;
            backend
                .create_instance(CreateInstanceRequest {
                    id: id.clone(),
                    workflow_type: Self::NAME.to_owned(),
                    version: Self::VERSION.to_owned(),
                    state,
                    lease_ms: Some(options.lease.as_millis() as u64),
                    max_attempts: Some(options.max_attempts),
                    on_exhausted: Some(options.on_exhausted),
                })
                .await?;
            Ok(Handle {
                backend,
                id,
                _w: PhantomData,
            })
        }
    }

    /// A handle on an existing instance (nothing is checked until it is used).
    fn handle<B: Backend + Clone + 'static>(
        &self,
        backend: &B,
        id: impl Into<String>,
    ) -> Handle<Self> {
        Handle {
            backend: Arc::new(backend.clone()),
            id: id.into(),
            _w: PhantomData,
        }
    }
}

impl<W: Workflow> WorkflowExt for W {}

/// A typed handle on one instance of workflow `W`.
pub struct Handle<W> {
    backend: Arc<dyn Backend>,
    id: String,
    _w: PhantomData<fn() -> W>,
}

impl<W> Clone for Handle<W> {
    fn clone(&self) -> Self {
        Self {
            backend: self.backend.clone(),
            id: self.id.clone(),
            _w: PhantomData,
        }
    }
}

impl<W> std::fmt::Debug for Handle<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle").field("id", &self.id).finish()
    }
}

impl<W: Workflow> Handle<W> {
    /// The instance id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Admit a message under `message_id` (admitted once: a repeat answers the first turn).
    pub async fn send(
        &self,
        message: W::Message,
        message_id: impl Into<String>,
    ) -> Result<WorkflowTurn> {
        let (message, _) =
            codec::encode_checked(&W::Codec::default(), "message", &message, W::message_eq())
                .map_err(codec_error)?;
        self.backend
            .send_message(MessageRequest {
                workflow_id: self.id.clone(),
                id: message_id.into(),
                message,
                origin: Some(MessageOrigin::new("app")),
            })
            .await
    }

    /// Send signal `S` to turn `turn` under event id `id` (delivered once).
    pub async fn signal<S>(
        &self,
        turn: u64,
        value: S,
        id: impl Into<String>,
    ) -> Result<WorkflowTurn>
    where
        S: Signal,
        W: Accepts<S>,
    {
        let (value, _) =
            codec::encode_verified(&W::Codec::default(), "signal", &value).map_err(codec_error)?;
        self.backend
            .signal(SignalRequest {
                workflow_id: self.id.clone(),
                turn,
                id: id.into(),
                name: S::NAME.to_owned(),
                value,
            })
            .await
    }

    /// The instance as the server reports it.
    pub async fn instance(&self) -> Result<WorkflowInstance> {
        self.backend.get_instance(&self.id).await
    }

    /// The saved state, decoded.
    pub async fn state(&self) -> Result<W::State> {
        let inst = self.instance().await?;
        codec::decode(&W::Codec::default(), "state", &inst.state).map_err(codec_error)
    }

    /// One turn, pending or kept in history.
    pub async fn turn(&self, turn: u64) -> Result<WorkflowTurn> {
        self.backend
            .turn(TurnQuery {
                id: self.id.clone(),
                turn,
            })
            .await
    }

    /// The reply of a completed turn, decoded; `None` while the turn has not completed, and
    /// when it completed without a reply (unless `null` decodes as the reply type, e.g. `()`).
    pub async fn reply(&self, turn: u64) -> Result<Option<W::Reply>> {
        let t = self.turn(turn).await?;
        if t.status != TurnStatus::Completed {
            return Ok(None);
        }
        match codec::decode(&W::Codec::default(), "reply", &t.result) {
            Ok(reply) => Ok(Some(reply)),
            // A turn that ended without a reply (e.g. one that continued) records `null`.
            Err(_) if t.result.is_null() => Ok(None),
            Err(e) => Err(codec_error(e)),
        }
    }

    /// The unfinished turns, oldest first (a page of up to 100, with payloads).
    pub async fn inbox(&self) -> Result<InboxResponse> {
        self.backend
            .instance_inbox(InboxQuery {
                id: self.id.clone(),
                after: None,
                limit: Some(100),
                payloads: true,
            })
            .await
    }

    /// Finished turns after `after` (a page of up to 50).
    pub async fn history(&self, after: Option<u64>) -> Result<HistoryResponse> {
        self.backend
            .history(HistoryQuery {
                id: self.id.clone(),
                after,
                limit: Some(50),
            })
            .await
    }

    async fn control(&self, action: ControlAction, turn: Option<u64>) -> Result<WorkflowInstance> {
        self.backend
            .control(ControlRequest {
                workflow_id: self.id.clone(),
                action,
                turn,
            })
            .await
    }

    /// Stop handing out claims (messages are still admitted).
    pub async fn pause(&self) -> Result<WorkflowInstance> {
        self.control(ControlAction::Pause, None).await
    }
    /// Hand out claims again.
    pub async fn resume(&self) -> Result<WorkflowInstance> {
        self.control(ControlAction::Resume, None).await
    }
    /// Run a turn that failed for good again.
    pub async fn retry(&self, turn: u64) -> Result<WorkflowInstance> {
        self.control(ControlAction::Retry, Some(turn)).await
    }
    /// Move a turn that failed for good to history and go on.
    pub async fn skip(&self, turn: u64) -> Result<WorkflowInstance> {
        self.control(ControlAction::Skip, Some(turn)).await
    }
    /// Cancel an unfinished turn, leaving the state unchanged.
    pub async fn cancel_turn(&self, turn: u64) -> Result<WorkflowInstance> {
        self.control(ControlAction::CancelTurn, Some(turn)).await
    }
    /// Make a turn waiting on a retry time ready now.
    pub async fn wake(&self) -> Result<WorkflowInstance> {
        self.control(ControlAction::Wake, None).await
    }
    /// Delete the instance with its inbox and history.
    pub async fn delete(&self) -> Result<bool> {
        Ok(self
            .backend
            .delete_instance(DeleteRequest {
                workflow_id: self.id.clone(),
            })
            .await?
            .deleted)
    }
}
