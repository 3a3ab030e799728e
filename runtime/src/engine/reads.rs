//! Reads: instances, inboxes, history and single turns, shown as settled at the current time.

use super::rules;
use super::*;
use crate::store::{InstanceFilter, TurnRange};
use crate::validate;
use turnwise_rules::limits;

fn page_limit(limit: Option<u32>, max: u32) -> Result<usize> {
    let n = limit.unwrap_or(limits::PAGE_DEFAULT.min(max));
    validate::range("limit", n.into(), 1, max.into())?;
    Ok(n as usize)
}

impl Engine {
    pub(super) async fn do_get(&self, id: &str) -> Result<WorkflowInstance> {
        validate::identifier("id", id)?;
        let inst = self.load(id).await?;
        self.view_instance(inst).await
    }

    pub(super) async fn do_list(&self, q: ListInstancesQuery) -> Result<InstanceList> {
        let limit = page_limit(q.limit, limits::PAGE_MAX)?;
        let filter = InstanceFilter {
            after: q.after,
            limit,
            ..Default::default()
        };
        let records = self.inner.store.list_instances(&self.ns, filter).await?;
        let next_after = (records.len() == limit)
            .then(|| records.last().map(|i| i.id.clone()))
            .flatten();
        let mut instances = Vec::with_capacity(records.len());
        for inst in records {
            instances.push(self.view_instance(inst).await?);
        }
        Ok(InstanceList {
            instances,
            next_after,
        })
    }

    pub(super) async fn do_inbox(&self, q: InboxQuery) -> Result<InboxResponse> {
        validate::identifier("id", &q.id)?;
        let limit = page_limit(q.limit, limits::PAGE_MAX)?;
        let mut inst = self.load(&q.id).await?;
        let now = self.now();
        let range = TurnRange {
            finished: false,
            after: q.after,
            limit,
        };
        let mut turns = self
            .inner
            .store
            .list_turns(&self.ns, &inst.id, range)
            .await?;
        let mut head = None;
        if let Some(first) = turns
            .first_mut()
            .filter(|t| inst.pending.first() == Some(&t.number))
        {
            rules::settle(&mut inst, first, now, &self.inner.config);
            head = Some(first.clone());
        }
        turns.retain(|t| !t.is_finished());
        let status = match head {
            Some(_) => rules::instance_status(&inst, head.as_ref(), now),
            None => self.view_instance(inst.clone()).await?.status,
        };
        let next_after = (turns.len() == limit)
            .then(|| turns.last().map(|t| t.number))
            .flatten();
        let oldest = self.inner.store.list_turns(
            &self.ns,
            &inst.id,
            TurnRange {
                finished: false,
                after: None,
                limit: 1,
            },
        );
        let oldest_received_at_ms = oldest.await?.first().map(|t| t.created_at_ms);
        let newest = match inst.pending.last() {
            Some(&n) => self
                .inner
                .store
                .load_turn(&self.ns, &inst.id, n)
                .await?
                .map(|t| t.created_at_ms),
            None => None,
        };
        Ok(InboxResponse {
            workflow_id: inst.id.clone(),
            workflow_type: inst.workflow_type.clone(),
            version: inst.version.clone(),
            status,
            pending_messages: inst.pending.len() as u64,
            messages: turns
                .iter()
                .map(|t| rules::inbox_entry(t, q.payloads))
                .collect(),
            next_after,
            oldest_received_at_ms,
            newest_received_at_ms: newest,
        })
    }

    pub(super) async fn do_type_inbox(&self, q: TypeInboxQuery) -> Result<TypeInboxResponse> {
        validate::identifier("workflow_type", &q.workflow_type)?;
        if let Some(v) = &q.version {
            validate::identifier("version", v)?;
        }
        let limit = page_limit(q.limit, limits::PAGE_MAX)?;
        let store = &self.inner.store;
        let (identities, with_messages) = store
            .count_instances(&self.ns, &q.workflow_type, q.version.as_deref())
            .await?;
        let filter = InstanceFilter {
            workflow_type: Some(q.workflow_type.clone()),
            version: q.version.clone(),
            after: q.after,
            limit,
        };
        let records = store.list_instances(&self.ns, filter).await?;
        let next_after = (records.len() == limit)
            .then(|| records.last().map(|i| i.id.clone()))
            .flatten();
        let now = self.now();
        let mut instances = Vec::with_capacity(records.len());
        for mut inst in records {
            let mut head = self.load_head(&inst).await?;
            if let Some(h) = head.as_mut() {
                rules::settle(&mut inst, h, now, &self.inner.config);
            }
            instances.push(TypeInboxEntry {
                workflow_id: inst.id.clone(),
                version: inst.version.clone(),
                status: rules::instance_status(&inst, head.as_ref(), now),
                pending_messages: inst.pending.len() as u64,
                oldest_received_at_ms: head.as_ref().map(|h| h.created_at_ms),
                head: head.as_ref().map(|h| rules::inbox_entry(h, false)),
            });
        }
        Ok(TypeInboxResponse {
            workflow_type: q.workflow_type,
            version: q.version,
            identities,
            with_messages,
            instances,
            next_after,
        })
    }

    pub(super) async fn do_history(&self, q: HistoryQuery) -> Result<HistoryResponse> {
        validate::identifier("id", &q.id)?;
        let limit = page_limit(q.limit, 50)?;
        let inst = self.load(&q.id).await?;
        let range = TurnRange {
            finished: true,
            after: q.after,
            limit,
        };
        let turns = self
            .inner
            .store
            .list_turns(&self.ns, &inst.id, range)
            .await?;
        let next_after = (turns.len() == limit)
            .then(|| turns.last().map(|t| t.number))
            .flatten();
        Ok(HistoryResponse {
            turns: turns.iter().map(|t| rules::turn_view(&inst, t)).collect(),
            next_after,
        })
    }

    pub(super) async fn do_turn(&self, q: TurnQuery) -> Result<WorkflowTurn> {
        validate::identifier("id", &q.id)?;
        let mut inst = self.load(&q.id).await?;
        let mut turn = self.load_turn(&inst, q.turn).await?;
        if inst.pending.first() == Some(&turn.number) {
            rules::settle(&mut inst, &mut turn, self.now(), &self.inner.config);
        }
        Ok(rules::turn_view(&inst, &turn))
    }
}
