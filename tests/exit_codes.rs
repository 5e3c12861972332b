//! The exit code says whose move it is: 2 when the user must change what
//! they asked for (a name that is not there, input buddy cannot take), 1
//! when what was asked was right and a server or the machine failed.

use crate::support;

use support::BuddyCmd;

#[test]
fn an_mcp_login_the_server_fails_exits_1_and_a_server_not_configured_exits_2() {
    let url = format!("http://127.0.0.1:{}/mcp", support::free_port());
    let cmd = BuddyCmd::new().config(format!("[mcp_servers.down]\nurl = \"{url}\"\n"));
    let out = cmd.rerun(["mcp", "login", "down"]);
    out.assert_code(1);
    assert!(
        out.stderr.contains("cannot log in to down"),
        "{}",
        out.stderr
    );
    let out = cmd.rerun(["mcp", "login", "nowhere"]);
    out.assert_code(2);
    assert!(
        out.stderr.contains("no MCP server `nowhere`"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_session_named_that_is_not_there_exits_2_and_a_store_that_cannot_be_read_exits_1() {
    let cmd = BuddyCmd::new();
    let out = cmd.rerun(["export", "--last"]);
    out.assert_code(2);
    assert!(out.stderr.contains("no saved sessions"), "{}", out.stderr);
    // The sessions directory is a file: the store itself cannot be read.
    let root = cmd.work_dir().join(".buddyx");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("sessions"), "not a directory").unwrap();
    let out = cmd.rerun(["sessions"]);
    out.assert_code(1);
    assert!(out.stderr.contains("sessions"), "{}", out.stderr);
}

#[test]
fn arguments_to_an_mcp_call_that_are_not_a_json_object_exit_2_before_any_server_starts() {
    let cmd = BuddyCmd::new().config("[mcp_servers.x]\ncommand = \"/nonexistent/never-started\"\n");
    let out = cmd.rerun(["mcp", "call", "x", "tool", "[1, 2]"]);
    out.assert_code(2);
    assert!(
        out.stderr
            .contains("the arguments: must be one JSON object"),
        "{}",
        out.stderr
    );
    let out = cmd.rerun(["mcp", "call", "x", "tool", "{"]);
    out.assert_code(2);
    assert!(
        out.stderr.contains("the arguments: not JSON"),
        "{}",
        out.stderr
    );
}
