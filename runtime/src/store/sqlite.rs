//! (in progress) The SQLite store.
#![allow(missing_docs)]
use super::*;
use async_trait::async_trait;
use std::path::Path;
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Synchronous {
    Full,
    Normal,
    Off,
}
#[derive(Clone, Debug)]
pub struct SqliteOptions {
    pub synchronous: Synchronous,
}
pub struct SqliteStore;
impl SqliteStore {
    pub async fn open(path: &Path) -> Result<Self, StoreError> {
        let _ = path;
        Err(StoreError("not implemented yet".into()))
    }
}
#[async_trait]
impl Store for SqliteStore {
    async fn load_instance(&self, _: &str, _: &str) -> Result<Option<InstanceRecord>, StoreError> {
        unimplemented!()
    }
    async fn load_turn(&self, _: &str, _: &str, _: u64) -> Result<Option<TurnRecord>, StoreError> {
        unimplemented!()
    }
    async fn find_message(
        &self,
        _: &str,
        _: &str,
        _: &str,
    ) -> Result<Option<TurnRecord>, StoreError> {
        unimplemented!()
    }
    async fn list_turns(
        &self,
        _: &str,
        _: &str,
        _: TurnRange,
    ) -> Result<Vec<TurnRecord>, StoreError> {
        unimplemented!()
    }
    async fn list_instances(
        &self,
        _: &str,
        _: InstanceFilter,
    ) -> Result<Vec<InstanceRecord>, StoreError> {
        unimplemented!()
    }
    async fn count_instances(
        &self,
        _: &str,
        _: &str,
        _: Option<&str>,
    ) -> Result<(u64, u64), StoreError> {
        unimplemented!()
    }
    async fn due(
        &self,
        _: &str,
        _: &[WorkflowRef],
        _: Millis,
        _: usize,
    ) -> Result<Vec<String>, StoreError> {
        unimplemented!()
    }
    async fn next_due(&self, _: &str, _: &[WorkflowRef]) -> Result<Option<Millis>, StoreError> {
        unimplemented!()
    }
    async fn commit(&self, _: WriteSet) -> Result<(), CommitError> {
        unimplemented!()
    }
}
