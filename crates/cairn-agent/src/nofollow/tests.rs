use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};

use super::*;

struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    outside: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        Self {
            _dir: dir,
            root,
            outside: tempfile::tempdir().unwrap(),
        }
    }

    fn tree(&self) -> Tree {
        Tree::new(&self.root)
    }

    /// A file outside the root holding `text`, mode 0644.
    fn victim(&self, text: &str) -> PathBuf {
        let path = self.outside.path().join("victim");
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        path
    }

    fn outside_names(&self) -> Vec<String> {
        let mut names: Vec<_> = std::fs::read_dir(self.outside.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path).unwrap().mode() & 0o777
}

#[test]
fn creates_replaces_appends_and_reads() {
    let f = Fixture::new();
    let tree = f.tree();
    let rel = Path::new("a/b/c.txt");
    tree.open(rel, OpenFor::Replace)
        .unwrap()
        .write_all(b"one")
        .unwrap();
    tree.append(rel, b"+two").unwrap();
    assert_eq!(tree.read(rel, 100).unwrap().unwrap(), b"one+two");
    assert_eq!(tree.read(rel, 3).unwrap().unwrap(), b"one");
    tree.open(rel, OpenFor::Replace)
        .unwrap()
        .write_all(b"3")
        .unwrap();
    assert_eq!(std::fs::read_to_string(f.root.join(rel)).unwrap(), "3");
    tree.write(rel, b"whole").unwrap();
    assert_eq!(std::fs::read_to_string(f.root.join(rel)).unwrap(), "whole");
    assert!(tree.open(Path::new("a"), OpenFor::List).is_ok());
    assert!(tree.open(Path::new(""), OpenFor::List).is_ok());
    assert!(matches!(
        tree.open(Path::new("a"), OpenFor::Read),
        Err(FsError::IsDir { path }) if path == "a"
    ));
    assert!(tree.read(Path::new("a/missing"), 10).unwrap().is_none());
    assert!(
        tree.read(Path::new("nowhere/missing"), 10)
            .unwrap()
            .is_none()
    );
    assert!(matches!(
        tree.read(Path::new("../x"), 10),
        Err(FsError::BadPath { .. })
    ));
    assert!(matches!(
        tree.write(Path::new("/etc/x"), b""),
        Err(FsError::BadPath { .. })
    ));
    tree.create_new(Path::new("a/new.txt"), b"n").unwrap();
    assert!(matches!(
        tree.create_new(Path::new("a/new.txt"), b"again"),
        Err(FsError::Exists { .. })
    ));
    tree.remove(Path::new("a/new.txt")).unwrap();
    assert_eq!(tree.kind(Path::new("a/new.txt")).unwrap(), None);
    assert_eq!(tree.kind(Path::new("a")).unwrap(), Some(Kind::Dir));
    // A missing root is made for a write, and simply empty for a read.
    let fresh = Tree::new(f.root.join("later/ws"));
    assert!(fresh.read(Path::new("x"), 1).unwrap().is_none());
    fresh.write(Path::new("x"), b"1").unwrap();
    assert_eq!(fresh.read(Path::new("x"), 1).unwrap().unwrap(), b"1");
}

/// A link swapped in anywhere below the root is refused by every operation,
/// and nothing is read, written or created outside.
#[test]
fn refuses_a_link_in_a_middle_component() {
    let f = Fixture::new();
    let tree = f.tree();
    std::fs::create_dir(f.root.join("sub")).unwrap();
    symlink(f.outside.path(), f.root.join("sub/link")).unwrap();
    std::fs::write(f.outside.path().join("x.txt"), "outside").unwrap();
    let rel = Path::new("sub/link/x.txt");
    let is_link = |e: FsError| match e {
        FsError::Link { path, link } => {
            assert!(path.starts_with("sub/link/"), "{path}");
            assert_eq!(link, "sub/link");
        }
        other => panic!("{other:?}"),
    };
    for how in [OpenFor::Read, OpenFor::Replace, OpenFor::Append] {
        is_link(tree.open(rel, how).unwrap_err());
    }
    is_link(tree.read(rel, 10).unwrap_err());
    is_link(tree.write(rel, b"pwned").unwrap_err());
    is_link(tree.append(rel, b"pwned").unwrap_err());
    is_link(
        tree.create_new(Path::new("sub/link/new.txt"), b"pwned")
            .unwrap_err(),
    );
    is_link(
        tree.write(Path::new("sub/link/deeper/y.txt"), b"pwned")
            .unwrap_err(),
    );
    assert!(matches!(
        tree.list(Path::new("sub/link")),
        Err(FsError::Link { .. })
    ));
    assert!(matches!(tree.kind(rel), Err(FsError::Link { .. })));
    assert_eq!(tree.kind(Path::new("sub/link")).unwrap(), Some(Kind::Link));
    assert_eq!(f.outside_names(), ["x.txt"]);
    assert_eq!(
        std::fs::read_to_string(f.outside.path().join("x.txt")).unwrap(),
        "outside"
    );
}

/// A final link is never read or written through; a whole-file write
/// replaces the link itself and says so.
#[test]
fn refuses_a_final_link_and_replaces_it_on_write() {
    let f = Fixture::new();
    let tree = f.tree();
    let victim = f.victim("secret");
    symlink(&victim, f.root.join("USER.md")).unwrap();
    symlink(
        f.outside.path().join("dangling"),
        f.root.join("dangling.md"),
    )
    .unwrap();
    for rel in ["USER.md", "dangling.md"] {
        let rel = Path::new(rel);
        for how in [OpenFor::Read, OpenFor::Replace, OpenFor::Append] {
            assert!(
                matches!(tree.open(rel, how), Err(FsError::Link { .. })),
                "{rel:?} {how:?}"
            );
        }
        assert!(tree.read(rel, 100).unwrap_err().is_refusal());
        assert_eq!(tree.kind(rel).unwrap(), Some(Kind::Link));
    }
    let written = tree.write(Path::new("USER.md"), b"mine").unwrap();
    assert_eq!(
        written.replaced_links,
        [format!("USER.md -> {}", victim.display())]
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "secret");
    assert_eq!(mode(&victim), 0o644);
    assert_eq!(tree.kind(Path::new("USER.md")).unwrap(), Some(Kind::File));
    assert_eq!(
        tree.read(Path::new("USER.md"), 10).unwrap().unwrap(),
        b"mine"
    );
    assert_eq!(f.outside_names(), ["victim"]);
}

/// A file with another name (maybe outside) is neither read, appended to nor
/// emptied in place; a whole-file write gives the name a file of its own.
#[test]
fn refuses_a_hard_link() {
    let f = Fixture::new();
    let tree = f.tree();
    let victim = f.victim("secret");
    std::fs::hard_link(&victim, f.root.join("AGENTS.md")).unwrap();
    let rel = Path::new("AGENTS.md");
    for how in [OpenFor::Read, OpenFor::Replace, OpenFor::Append] {
        match tree.open(rel, how) {
            Err(FsError::HardLink { path, links: 2 }) => assert_eq!(path, "AGENTS.md"),
            other => panic!("{how:?}: {other:?}"),
        }
    }
    assert!(tree.read(rel, 100).unwrap_err().is_refusal());
    assert!(tree.append(rel, b"x").unwrap_err().is_refusal());
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "secret");
    tree.write(rel, b"mine").unwrap();
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "secret");
    assert_eq!(std::fs::metadata(&victim).unwrap().nlink(), 1);
    assert_eq!(tree.read(rel, 10).unwrap().unwrap(), b"mine");
}

/// A FIFO (or any special file) is refused before it is opened: a read
/// does not hang waiting for a writer.
#[test]
fn refuses_a_fifo() {
    let f = Fixture::new();
    let tree = f.tree();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        f.root.join("HEARTBEAT.md"),
        FileType::Fifo,
        Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let rel = Path::new("HEARTBEAT.md");
    for how in [OpenFor::Read, OpenFor::Replace, OpenFor::Append] {
        match tree.open(rel, how) {
            Err(FsError::Special { kind, .. }) => assert_eq!(kind, "a FIFO"),
            other => panic!("{how:?}: {other:?}"),
        }
    }
    assert!(tree.read(rel, 10).unwrap_err().is_refusal());
    assert_eq!(tree.kind(rel).unwrap(), Some(Kind::Special));
}

/// A whole-file write goes to a fresh name made with `O_EXCL` and is renamed
/// into place: a planted `.tmp` link is never used, the file is a new inode,
/// and nothing is left beside it.
#[test]
fn writes_through_a_fresh_exclusive_temporary_then_renames() {
    let f = Fixture::new();
    let tree = f.tree();
    let victim = f.victim("untouched");
    symlink(&victim, f.root.join("MEMORY_SNAPSHOT.md.tmp")).unwrap();
    std::fs::write(f.root.join("MEMORY_SNAPSHOT.md"), "old").unwrap();
    let before = std::fs::metadata(f.root.join("MEMORY_SNAPSHOT.md"))
        .unwrap()
        .ino();
    let mut source = "new snapshot".as_bytes();
    let written = tree
        .write_from(Path::new("MEMORY_SNAPSHOT.md"), &mut source, true)
        .unwrap();
    assert!(written.replaced_links.is_empty());
    let after = std::fs::metadata(f.root.join("MEMORY_SNAPSHOT.md")).unwrap();
    assert_ne!(after.ino(), before, "replaced by a rename, not rewritten");
    assert_eq!(
        std::fs::read_to_string(f.root.join("MEMORY_SNAPSHOT.md")).unwrap(),
        "new snapshot"
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched");
    let mut names: Vec<_> = std::fs::read_dir(&f.root)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["MEMORY_SNAPSHOT.md", "MEMORY_SNAPSHOT.md.tmp"]);
    // Without `replace`, an existing name is kept and the temporary removed.
    assert!(matches!(
        tree.write_from(Path::new("MEMORY_SNAPSHOT.md"), &mut "x".as_bytes(), false),
        Err(FsError::Exists { .. })
    ));
    assert_eq!(std::fs::read_dir(&f.root).unwrap().count(), 2);
    tree.write_from(Path::new("other.md"), &mut "y".as_bytes(), false)
        .unwrap();
    // A directory in the way is not replaced.
    std::fs::create_dir(f.root.join("dir")).unwrap();
    assert!(matches!(
        tree.write(Path::new("dir"), b"x"),
        Err(FsError::IsDir { .. })
    ));
    assert_eq!(std::fs::read_dir(&f.root).unwrap().count(), 4);
}

/// Restore's tree: a link where a directory should be is replaced by a
/// directory (its target untouched), and new files and directories are
/// exactly 0600 and 0700.
#[test]
fn a_private_tree_replacing_links_puts_real_directories_back() {
    let f = Fixture::new();
    symlink(f.outside.path(), f.root.join("media")).unwrap();
    let rel = Path::new("media/deep/a.png");
    assert!(matches!(
        f.tree().write(rel, b"png"),
        Err(FsError::Link { .. })
    ));
    let tree = f.tree().private().replacing_links();
    let written = tree.write(rel, b"png").unwrap();
    assert_eq!(
        written.replaced_links,
        [format!("media -> {}", f.outside.path().display())]
    );
    assert!(f.outside_names().is_empty());
    assert_eq!(mode(&f.root.join("media")), 0o700);
    assert_eq!(mode(&f.root.join("media/deep")), 0o700);
    assert_eq!(mode(&f.root.join(rel)), 0o600);
    assert_eq!(std::fs::read(f.root.join(rel)).unwrap(), b"png");
}

#[test]
fn lists_without_following() {
    let f = Fixture::new();
    let tree = f.tree();
    tree.write(Path::new("d/b.txt"), b"12345").unwrap();
    tree.write(Path::new("d/sub/c.txt"), b"").unwrap();
    symlink(f.outside.path(), f.root.join("d/a-link")).unwrap();
    let listed: Vec<_> = tree
        .list(Path::new("d"))
        .unwrap()
        .into_iter()
        .map(|e| (e.name.into_string().unwrap(), e.kind, e.len))
        .collect();
    assert_eq!(
        listed,
        [
            ("a-link".to_string(), Kind::Link, 0),
            ("b.txt".to_string(), Kind::File, 5),
            ("sub".to_string(), Kind::Dir, 0),
        ]
    );
    assert!(matches!(
        tree.list(Path::new("d/b.txt")),
        Err(FsError::NotDir { .. })
    ));
    let mut text = String::new();
    tree.open(Path::new("d/b.txt"), OpenFor::Read)
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    assert_eq!(text, "12345");
}
