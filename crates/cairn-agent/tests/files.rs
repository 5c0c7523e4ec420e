//! File tools: work inside the workspace, refuse `..`, absolute and symlink escapes.
#![cfg(unix)]
#![expect(clippy::unwrap_used, reason = "test helpers outside #[test] fns")]
#![expect(
    clippy::disallowed_methods,
    reason = "test fixtures may use blocking std::fs"
)]

mod support;

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use cairn_agent::tools::files::{FileReadTool, FileWriteTool, FilesConfig, ListDirTool};
use cairn_agent::tools::lines::read_lines;
use cairn_agent::tools::{ToolContext, ToolError};
use serde_json::json;
use support::RunGated;
use tokio::io::{AsyncRead, AsyncReadExt, BufReader, ReadBuf};

struct Fixture {
    workspace: tempfile::TempDir,
    outside: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Self {
        let workspace = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.txt"), "outside secret").unwrap();
        std::fs::create_dir(workspace.path().join("notes")).unwrap();
        std::fs::write(
            workspace.path().join("notes/a.txt"),
            "line1\nline2\nline3\n",
        )
        .unwrap();
        std::os::unix::fs::symlink(outside.path(), workspace.path().join("escape_dir")).unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("secret.txt"),
            workspace.path().join("escape.txt"),
        )
        .unwrap();
        std::os::unix::fs::symlink(
            workspace.path().join("notes/a.txt"),
            workspace.path().join("inner.txt"),
        )
        .unwrap();
        Self { workspace, outside }
    }

    fn ctx(&self) -> ToolContext {
        ToolContext::new(self.workspace.path(), "s")
    }
}

fn not_permitted(result: Result<cairn_agent::tools::ToolOutput, ToolError>) -> String {
    match result {
        Err(ToolError::NotPermitted(m)) => m,
        other => panic!("expected NotPermitted, got {other:?}"),
    }
}

#[tokio::test]
async fn read_inside_workspace_with_paging() {
    let f = Fixture::new();
    let read = FileReadTool::new(FilesConfig::default());
    let out = read
        .run_gated(json!({"path": "notes/a.txt"}), &f.ctx())
        .await
        .unwrap();
    assert_eq!(out.content, "line1\nline2\nline3\n");
    let out = read
        .run_gated(
            json!({"path": "./notes/../notes/a.txt", "offset": 2, "limit": 1}),
            &f.ctx(),
        )
        .await
        .unwrap();
    assert_eq!(out.content, "line2\n");
    let out = read
        .run_gated(json!({"path": "inner.txt"}), &f.ctx())
        .await
        .unwrap();
    assert!(
        out.content.starts_with("line1"),
        "symlinks that stay inside are fine"
    );
    let out = read
        .run_gated(json!({"path": "notes/a.txt", "offset": 10}), &f.ctx())
        .await
        .unwrap();
    assert!(out.content.contains("has only 3 lines"));
}

#[tokio::test]
async fn read_refuses_escapes() {
    let f = Fixture::new();
    let read = FileReadTool::new(FilesConfig::default());
    let ctx = f.ctx();
    assert!(
        not_permitted(read.run_gated(json!({"path": "../x"}), &ctx).await)
            .contains("outside the workspace")
    );
    assert!(
        not_permitted(
            read.run_gated(json!({"path": "notes/../../../etc/passwd"}), &ctx)
                .await
        )
        .contains("outside")
    );
    let abs = f.outside.path().join("secret.txt");
    assert!(
        not_permitted(
            read.run_gated(json!({"path": abs.to_str().unwrap()}), &ctx)
                .await
        )
        .contains("outside")
    );
    let m = not_permitted(read.run_gated(json!({"path": "escape.txt"}), &ctx).await);
    assert!(m.contains("after following symlinks"), "{m}");
    not_permitted(
        read.run_gated(json!({"path": "escape_dir/secret.txt"}), &ctx)
            .await,
    );
    not_permitted(read.run_gated(json!({"path": "~/.bashrc"}), &ctx).await);
}

#[tokio::test]
async fn extra_roots_widen_the_scope() {
    let f = Fixture::new();
    let config = FilesConfig {
        extra_roots: vec![f.outside.path().to_path_buf()],
        ..FilesConfig::default()
    };
    let read = FileReadTool::new(config);
    let out = read
        .run_gated(json!({"path": "escape.txt"}), &f.ctx())
        .await
        .unwrap();
    assert_eq!(out.content, "outside secret");
}

#[tokio::test]
async fn forbidden_paths_apply_inside_the_workspace() {
    let f = Fixture::new();
    std::fs::create_dir(f.workspace.path().join(".ssh")).unwrap();
    std::fs::write(f.workspace.path().join(".ssh/id_rsa"), "key").unwrap();
    let read = FileReadTool::new(FilesConfig::default());
    let m = not_permitted(
        read.run_gated(json!({"path": ".ssh/id_rsa"}), &f.ctx())
            .await,
    );
    assert!(m.contains("protected path"), "{m}");
}

#[tokio::test]
async fn read_caps_large_files_and_rejects_binary() {
    let f = Fixture::new();
    let big: String = (0..1000).map(|i| format!("line {i}\n")).collect();
    std::fs::write(f.workspace.path().join("big.txt"), &big).unwrap();
    std::fs::write(f.workspace.path().join("bin.dat"), [0u8, 1, 2, 0]).unwrap();
    let read = FileReadTool::new(FilesConfig {
        max_read_bytes: 100,
        ..FilesConfig::default()
    });
    let out = read
        .run_gated(json!({"path": "big.txt"}), &f.ctx())
        .await
        .unwrap();
    assert!(out.content.starts_with("line 0\n"));
    assert!(out.content.contains("output cut at 100 bytes"));
    assert!(out.content.contains("continue with offset="));
    let err = read
        .run_gated(json!({"path": "bin.dat"}), &f.ctx())
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::InvalidArguments(m) if m.contains("binary")));
    let err = read
        .run_gated(json!({"path": "notes"}), &f.ctx())
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::InvalidArguments(m) if m.contains("directory")));
    let err = read
        .run_gated(json!({"path": 5}), &f.ctx())
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::InvalidArguments(m) if m.contains("`path` must be a string")));
}

#[tokio::test]
async fn write_inside_workspace_and_refuse_escapes() {
    let f = Fixture::new();
    let write = FileWriteTool::new(FilesConfig::default());
    let ctx = f.ctx();
    let out = write
        .run_gated(
            json!({"path": "new/dir/file.txt", "content": "hello"}),
            &ctx,
        )
        .await
        .unwrap();
    assert_eq!(out.content, "wrote 5 bytes to new/dir/file.txt");
    write
        .run_gated(
            json!({"path": "new/dir/file.txt", "content": " world", "append": true}),
            &ctx,
        )
        .await
        .unwrap();
    let written = std::fs::read_to_string(f.workspace.path().join("new/dir/file.txt")).unwrap();
    assert_eq!(written, "hello world");

    not_permitted(
        write
            .run_gated(json!({"path": "../evil.txt", "content": "x"}), &ctx)
            .await,
    );
    not_permitted(
        write
            .run_gated(json!({"path": "escape_dir/evil.txt", "content": "x"}), &ctx)
            .await,
    );
    not_permitted(
        write
            .run_gated(json!({"path": "escape.txt", "content": "x"}), &ctx)
            .await,
    );
    assert!(!f.outside.path().join("evil.txt").exists());
    assert_eq!(
        std::fs::read_to_string(f.outside.path().join("secret.txt")).unwrap(),
        "outside secret"
    );

    let small = FileWriteTool::new(FilesConfig {
        max_write_bytes: 3,
        ..FilesConfig::default()
    });
    let err = small
        .run_gated(json!({"path": "x.txt", "content": "toolong"}), &ctx)
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::InvalidArguments(_)));
}

#[tokio::test]
async fn list_dir_shows_tree_without_following_symlinks() {
    let f = Fixture::new();
    let list = ListDirTool::new(FilesConfig::default());
    let out = list.run_gated(json!({}), &f.ctx()).await.unwrap();
    assert_eq!(
        out.content,
        "escape.txt -> (symlink, not followed)\nescape_dir -> (symlink, not followed)\ninner.txt -> (symlink, not followed)\nnotes/"
    );
    let out = list.run_gated(json!({"depth": 2}), &f.ctx()).await.unwrap();
    assert!(out.content.contains("notes/a.txt  18 B"));
    assert!(!out.content.contains("secret"));
    not_permitted(
        list.run_gated(json!({"path": "escape_dir"}), &f.ctx())
            .await,
    );
    not_permitted(list.run_gated(json!({"path": ".."}), &f.ctx()).await);
    let capped = ListDirTool::new(FilesConfig {
        max_list_entries: 2,
        ..FilesConfig::default()
    });
    let out = capped.run_gated(json!({}), &f.ctx()).await.unwrap();
    assert!(out.content.contains("stopped after 2 entries"));
}

/// An `AsyncRead` that counts the bytes pulled through it.
struct Counting<R> {
    inner: R,
    pulled: Arc<AtomicUsize>,
}

impl<R: AsyncRead + Unpin> AsyncRead for Counting<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.inner).poll_read(cx, buf);
        self.pulled
            .fetch_add(buf.filled().len() - before, Ordering::SeqCst);
        poll
    }
}

#[tokio::test]
async fn a_huge_single_line_is_read_only_up_to_the_cap() {
    const LINE: u64 = 8 << 20;
    let pulled = Arc::new(AtomicUsize::new(0));
    let source = Counting {
        inner: tokio::io::repeat(b'a').take(LINE),
        pulled: pulled.clone(),
    };
    let mut reader = BufReader::new(source);
    let window = read_lines(&mut reader, 1, u64::MAX, 1000).await.unwrap();
    assert_eq!(window.bytes, vec![b'a'; 1000], "the head of the line");
    assert_eq!(window.cut_at, Some(1));
    let pulled = pulled.load(Ordering::SeqCst);
    assert!(
        pulled <= 1000 + 8192,
        "pulled {pulled} bytes of an {LINE}-byte line to return 1000"
    );
}

#[tokio::test]
async fn line_windows_do_not_depend_on_buffer_size() {
    let text = b"one\ntwo\nthree\nfour\nfive";
    // (offset, limit, max) -> (bytes, seen, taken, cut_at)
    let cases = [
        (
            (1, u64::MAX, 100),
            ("one\ntwo\nthree\nfour\nfive", 5, 5, None),
        ),
        ((2, 2, 100), ("two\nthree\n", 4, 2, None)),
        ((4, u64::MAX, 100), ("four\nfive", 5, 2, None)),
        ((1, u64::MAX, 9), ("one\ntwo\n", 3, 2, Some(3))),
        ((3, u64::MAX, 4), ("thre", 3, 0, Some(3))),
        ((9, u64::MAX, 100), ("", 5, 0, None)),
    ];
    for capacity in [1, 2, 3, 7, 64] {
        for ((offset, limit, max), (bytes, seen, taken, cut_at)) in cases {
            let mut reader = BufReader::with_capacity(capacity, &text[..]);
            let w = read_lines(&mut reader, offset, limit, max).await.unwrap();
            let case = format!("capacity {capacity}, offset {offset}, limit {limit}, max {max}");
            assert_eq!(String::from_utf8_lossy(&w.bytes), bytes, "{case}");
            assert_eq!((w.seen, w.taken, w.cut_at), (seen, taken, cut_at), "{case}");
        }
    }
}

/// A dangling symlink in the workspace pointing outside is refused by
/// `file_write` (replace and append), and nothing is created outside; the
/// same for a dangling directory link in the middle of the path.
#[tokio::test]
async fn write_refuses_dangling_symlinks_out_of_the_workspace() {
    let f = Fixture::new();
    let ws = f.workspace.path();
    let target = f.outside.path().join("planted.txt");
    std::os::unix::fs::symlink(&target, ws.join("dangling.txt")).unwrap();
    let dir_target = f.outside.path().join("newdir");
    std::os::unix::fs::symlink(&dir_target, ws.join("dangling_dir")).unwrap();
    let write = FileWriteTool::new(FilesConfig::default());
    let ctx = f.ctx();
    for append in [false, true] {
        let m = not_permitted(
            write
                .run_gated(
                    json!({"path": "dangling.txt", "content": "pwned", "append": append}),
                    &ctx,
                )
                .await,
        );
        assert!(m.contains("symbolic link"), "{m}");
    }
    let m = not_permitted(
        write
            .run_gated(
                json!({"path": "dangling_dir/x.txt", "content": "pwned"}),
                &ctx,
            )
            .await,
    );
    assert!(m.contains("symbolic link"), "{m}");
    assert!(!target.exists(), "written outside through the link");
    assert!(!dir_target.exists(), "directory created outside");
    // Reading through the dangling link is refused the same way.
    let read = FileReadTool::new(FilesConfig::default());
    std::fs::write(&target, "outside").unwrap();
    not_permitted(read.run_gated(json!({"path": "dangling.txt"}), &ctx).await);
    // Ordinary writes still work, new files and replacements alike.
    write
        .run_gated(json!({"path": "notes/new/b.txt", "content": "one"}), &ctx)
        .await
        .unwrap();
    write
        .run_gated(json!({"path": "notes/new/b.txt", "content": "two"}), &ctx)
        .await
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(ws.join("notes/new/b.txt")).unwrap(),
        "two"
    );
}

/// A hard link to a file outside is neither read nor written (in place or
/// appended); in a read-only folder of the person's (`skills.paths`) a file
/// with several names reads as usual.
#[tokio::test]
async fn hard_links_are_refused_except_in_the_persons_read_only_roots() {
    let f = Fixture::new();
    let secret = f.outside.path().join("secret.txt");
    std::fs::hard_link(&secret, f.workspace.path().join("linked.txt")).unwrap();
    let ctx = f.ctx();
    let read = FileReadTool::new(FilesConfig::default());
    let m = not_permitted(read.run_gated(json!({"path": "linked.txt"}), &ctx).await);
    assert!(m.contains("hard links"), "{m}");
    let write = FileWriteTool::new(FilesConfig::default());
    for append in [false, true] {
        let m = not_permitted(
            write
                .run_gated(
                    json!({"path": "linked.txt", "content": "pwned", "append": append}),
                    &ctx,
                )
                .await,
        );
        assert!(m.contains("hard links"), "{m}");
    }
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "outside secret");

    let skills = tempfile::tempdir().unwrap();
    std::fs::hard_link(&secret, skills.path().join("SKILL.md")).unwrap();
    let config = FilesConfig {
        read_only_roots: vec![skills.path().to_path_buf()],
        ..FilesConfig::default()
    };
    let path = skills.path().join("SKILL.md");
    let out = FileReadTool::new(config)
        .run_gated(json!({"path": path.to_str().unwrap()}), &ctx)
        .await
        .unwrap();
    assert_eq!(out.content, "outside secret");
}
