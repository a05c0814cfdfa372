//! The command-line endpoint check equals the config check, through the real
//! binary: each spelling of this host's loopback address, direct or embedded in a form routed
//! off the host (NAT64, local-use NAT64, 6to4, Teredo, IPv4-compatible), gets the same answer
//! from `--chat-url URL` as from `.forum/runtime.toml` with `chat_url = URL` and
//! `is_local = true` (what a loopback URL typed as a flag stands for), in `runtime inspect` and
//! in `submit`; a refused one writes nothing.

use crate::common::Repo;

/// A host form and whether it reaches this host (admitted) or not (refused on both paths).
const FORMS: &[(&str, &str, bool)] = &[
    ("IPv4 loopback", "127.0.0.1", true),
    ("IPv6 loopback", "[::1]", true),
    ("IPv4-mapped loopback", "[::ffff:127.0.0.1]", true),
    ("localhost", "localhost", true),
    ("NAT64", "[64:ff9b::7f00:1]", false),
    ("NAT64, dotted", "[64:ff9b::127.0.0.1]", false),
    ("local-use NAT64", "[64:ff9b:1::7f00:1]", false),
    ("6to4", "[2002:7f00:1::]", false),
    ("Teredo server", "[2001:0:7f00:1::f7f7:f7f7]", false),
    ("Teredo client", "[2001:0:4136:e378::80ff:fffe]", false),
    ("IPv4-compatible", "[::127.0.0.1]", false),
    ("IPv4-compatible, hex", "[::7f00:1]", false),
];

/// Runs git forum in `r` with `args`; returns its exit code and stderr.
fn forum(r: &Repo, args: &[&str]) -> (i32, String) {
    let o = r.forum().args(args).output().expect("run git-forum");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn every_loopback_form_gets_the_same_answer_from_the_flag_and_the_file() {
    // Nothing listens on the port: the answer is the check's, never a connection's.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    for (form, host, admitted) in FORMS {
        let url = format!("http://{host}:{port}/v1/chat/completions");
        let flag = Repo::new("sha1");
        let (flag_code, flag_err) = forum(
            &flag,
            &["runtime", "inspect", "--chat-url", &url, "--model", "m"],
        );
        let file = Repo::new("sha1");
        std::fs::create_dir_all(file.path().join(".forum")).unwrap();
        std::fs::write(
            file.path().join(".forum/runtime.toml"),
            format!("[runtime.default]\nchat_url = \"{url}\"\nmodel = \"m\"\nis_local = true\n"),
        )
        .unwrap();
        let (file_code, file_err) = forum(&file, &["runtime", "inspect"]);
        assert_eq!(
            (flag_code, file_code),
            if *admitted { (0, 0) } else { (1, 1) },
            "{form} {host}: flag: {flag_err}\nfile: {file_err}"
        );
        if *admitted {
            continue;
        }
        assert!(
            flag_err.contains("routed off this host"),
            "{form}: {flag_err}"
        );
        assert!(
            file_err.contains("is_local = true needs a host that is loopback itself"),
            "{form}: {file_err}"
        );
        // A submit is refused before anything is written, whichever path named the URL.
        for (r, args) in [
            (
                &flag,
                vec!["submit", "--chat-url", url.as_str(), "--model", "m", "hi"],
            ),
            (&file, vec!["submit", "hi"]),
        ] {
            let before = r.snapshot();
            let (code, err) = forum(r, &args);
            assert_eq!(code, 2, "{form}: {err}");
            assert_eq!(err.trim_end().lines().count(), 1, "{form}: {err}");
            assert_eq!(r.snapshot(), before, "{form}");
        }
    }
}
