//! `Engine::connect` chooses the store by the scheme of its address (`engine::Driver`).

#![cfg(feature = "sqlite")]

use turnwise::engine::Driver;
use turnwise::{Engine, Error};

#[tokio::test]
async fn a_sqlite_address_opens_its_file_with_or_without_the_scheme() {
    let dir = tempfile::tempdir().unwrap();
    let with_scheme = dir.path().join("with-scheme.db");
    let engine = Engine::connect(&format!("sqlite://{}", with_scheme.display()))
        .await
        .expect("sqlite://PATH opens the file");
    engine.health().await.unwrap();
    assert!(
        with_scheme.is_file(),
        "the store file is at the path after sqlite://"
    );

    let plain = dir.path().join("plain.db");
    let engine = Engine::connect(plain.to_str().unwrap()).await.unwrap();
    engine.health().await.unwrap();
    assert!(plain.is_file());
    assert_eq!(Driver::of(plain.to_str().unwrap()).unwrap(), Driver::Sqlite);
}

#[tokio::test]
async fn an_unknown_scheme_is_refused_naming_the_known_ones() {
    let dir = tempfile::tempdir().unwrap();
    let address = format!("mysql://{}", dir.path().join("x.db").display());
    let Err(error) = Engine::connect(&address).await else {
        panic!("a mysql:// address was taken");
    };
    let Error::Invalid { param, message } = &error else {
        panic!("not an invalid address: {error:?}");
    };
    assert_eq!(param, "address");
    assert!(
        message.contains("`mysql://` is not a store turnwise knows")
            && message.contains("postgres://")
            && message.contains("sqlite://PATH"),
        "{message}"
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing was created"
    );
    // The scheme is matched in any case.
    assert_eq!(Driver::of("PostgreSQL://h/db").unwrap(), Driver::Postgres);
}
