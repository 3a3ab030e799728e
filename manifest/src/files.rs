//! Manifests on disk: one canonical JSON file per version under a directory (by default
//! [`DIR`](crate::DIR), `turnwise/manifests/`), committed like a lockfile.
//!
//! A test keeps them current with [`check`]: it compares the manifests the code generates with
//! the committed files and, when `TURNWISE_MANIFESTS=write` is set, writes them instead.
//!
//! ```no_run
//! # use turnwise_manifest::{files, Manifest, Node};
//! # let order_v1 = Manifest::new("order", "v1", Node::Seq(vec![]));
//! // In a test of the crate that defines the workflows (`order_v1.manifest()` with
//! // `#[workflow]`):
//! files::check("turnwise/manifests", [order_v1]).unwrap();
//! ```

use std::path::{Path, PathBuf};

use crate::{Manifest, ManifestError};

/// The environment variable that makes [`check`] write the files: `TURNWISE_MANIFESTS=write`.
pub const WRITE_VAR: &str = "TURNWISE_MANIFESTS";

/// What went wrong with manifest files.
#[derive(Debug)]
pub enum FilesError {
    /// A file or directory could not be read or written.
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        error: std::io::Error,
    },
    /// A file is not a manifest this version reads.
    Invalid {
        /// The file.
        path: PathBuf,
        /// Why.
        error: ManifestError,
    },
    /// Committed files differ from what the code generates (written with
    /// `TURNWISE_MANIFESTS=write`).
    Stale {
        /// The files that are missing or differ, with what is wrong with each.
        files: Vec<(PathBuf, &'static str)>,
    },
    /// Two manifests of one name and version were given.
    Duplicate {
        /// `name version`.
        version: String,
    },
}

impl std::fmt::Display for FilesError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FilesError::Io { path, error } => write!(f, "{}: {error}", path.display()),
            FilesError::Invalid { path, error } => write!(f, "{}: {error}", path.display()),
            FilesError::Stale { files } => {
                write!(f, "the committed replay manifests are not current:")?;
                for (path, why) in files {
                    write!(f, "\n  {}: {why}", path.display())?;
                }
                write!(
                    f,
                    "\nrun the test again with {WRITE_VAR}=write to write them, review the diff and commit it"
                )
            }
            FilesError::Duplicate { version } => write!(
                f,
                "two manifests of {version} were given; each workflow version is written once"
            ),
        }
    }
}

impl std::error::Error for FilesError {}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> FilesError + '_ {
    move |error| FilesError::Io {
        path: path.to_owned(),
        error,
    }
}

/// Every manifest in `dir` (each `*.json` file), sorted by name and version. A missing
/// directory holds none.
///
/// # Errors
///
/// A file cannot be read or is not a manifest.
pub fn read_dir(dir: impl AsRef<Path>) -> Result<Vec<Manifest>, FilesError> {
    let dir = dir.as_ref();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(dir)(e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let path = entry.map_err(io(dir))?.path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let text = std::fs::read_to_string(&path).map_err(io(&path))?;
        let manifest = Manifest::from_json(&text).map_err(|error| FilesError::Invalid {
            path: path.clone(),
            error,
        })?;
        out.push(manifest);
    }
    out.sort_by(|a, b| (&a.name, &a.version).cmp(&(&b.name, &b.version)));
    Ok(out)
}

/// Write each of `manifests` to `dir` as [`Manifest::file_name`], creating the directory;
/// returns the files whose content changed.
///
/// # Errors
///
/// Two manifests of one version, or a file cannot be written.
pub fn write_dir(
    dir: impl AsRef<Path>,
    manifests: impl IntoIterator<Item = Manifest>,
) -> Result<Vec<PathBuf>, FilesError> {
    let dir = dir.as_ref();
    let manifests = distinct(manifests)?;
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let mut changed = Vec::new();
    for m in manifests {
        let path = dir.join(m.file_name());
        let text = m.to_canonical_json();
        if std::fs::read_to_string(&path).ok().as_deref() == Some(text.as_str()) {
            continue;
        }
        std::fs::write(&path, text).map_err(io(&path))?;
        changed.push(path);
    }
    Ok(changed)
}

/// Compare `manifests` with the files in `dir`, or write them when `TURNWISE_MANIFESTS=write`
/// is set. Files of other versions are left alone: a version no longer in the code keeps its
/// manifest as long as instances may run it.
///
/// # Errors
///
/// [`FilesError::Stale`] naming each missing or different file, or an I/O error.
pub fn check(
    dir: impl AsRef<Path>,
    manifests: impl IntoIterator<Item = Manifest>,
) -> Result<(), FilesError> {
    let dir = dir.as_ref();
    if std::env::var(WRITE_VAR).is_ok_and(|v| v == "write") {
        return write_dir(dir, manifests).map(drop);
    }
    let mut stale = Vec::new();
    for m in distinct(manifests)? {
        let path = dir.join(m.file_name());
        match std::fs::read_to_string(&path) {
            Ok(text) if text == m.to_canonical_json() => {}
            Ok(_) => stale.push((path, "differs from what the code generates")),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                stale.push((path, "is missing"));
            }
            Err(e) => return Err(io(&path)(e)),
        }
    }
    if stale.is_empty() {
        Ok(())
    } else {
        Err(FilesError::Stale { files: stale })
    }
}

/// `manifests`, refusing two of one name and version.
fn distinct(manifests: impl IntoIterator<Item = Manifest>) -> Result<Vec<Manifest>, FilesError> {
    let mut out: Vec<Manifest> = Vec::new();
    for m in manifests {
        if out
            .iter()
            .any(|o| o.name == m.name && o.version == m.version)
        {
            return Err(FilesError::Duplicate {
                version: format!("{} {}", m.name, m.version),
            });
        }
        out.push(m);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Call, CallKind, Node};

    fn manifest(version: &str, key: &str) -> Manifest {
        Manifest::new(
            "order",
            version,
            Node::Seq(vec![Node::Call(Call::new(
                CallKind::Step,
                key,
                "src/a.rs:1",
            ))]),
        )
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("turnwise-manifest-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn written_files_read_back_and_check_clean() {
        let dir = temp_dir("round-trip");
        let written = write_dir(&dir, [manifest("v1", "a"), manifest("v2", "b")]).unwrap();
        assert_eq!(written.len(), 2);
        assert!(write_dir(&dir, [manifest("v1", "a")]).unwrap().is_empty());
        let read = read_dir(&dir).unwrap();
        assert_eq!(read, [manifest("v1", "a"), manifest("v2", "b")]);
        check(&dir, [manifest("v1", "a")]).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_changed_or_missing_manifest_is_named() {
        let dir = temp_dir("stale");
        write_dir(&dir, [manifest("v1", "a")]).unwrap();
        let err = check(&dir, [manifest("v1", "renamed"), manifest("v3", "c")]).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("order.v1.json: differs"), "{text}");
        assert!(text.contains("order.v3.json: is missing"), "{text}");
        assert!(text.contains("TURNWISE_MANIFESTS=write"), "{text}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_files_and_duplicates_are_refused_by_name() {
        let dir = temp_dir("bad");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("x.json"), "{").unwrap();
        let err = read_dir(&dir).unwrap_err().to_string();
        assert!(err.contains("x.json: not a turnwise manifest"), "{err}");
        let err = write_dir(&dir, [manifest("v1", "a"), manifest("v1", "b")]).unwrap_err();
        assert!(err.to_string().contains("order v1"), "{err}");
        assert!(read_dir(dir.join("none")).unwrap().is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
