//! The session database's tables, made on start when missing. Every
//! instance runs this at start; an advisory lock makes them take turns, so
//! two starting at once cannot both create a table. A database written by a
//! newer buddy (a higher version row) is refused, not guessed at.

use super::db::{Db, DbError};

/// The tables' version; raised with each change a reader must know of.
/// 2: checkpoints and images are rows. A version-1 buddy would keep its
/// sessions' in its own directory, where the other instances never see
/// them, and would send the model a note for every image kept in a row.
pub const VERSION: i32 = 2;

/// Any number the other users of the database are unlikely to take for
/// their own advisory locks.
const MIGRATION_LOCK: i64 = 0x6275_6464_7930;

const TABLES: &str = "
CREATE TABLE IF NOT EXISTS buddy_schema (version integer NOT NULL);
CREATE TABLE IF NOT EXISTS buddy_sessions (
    id text PRIMARY KEY,
    created bigint NOT NULL,
    used bigint NOT NULL,
    cwd text NOT NULL,
    model text NOT NULL,
    title text NOT NULL DEFAULT '',
    origin text,
    messages bigint NOT NULL DEFAULT 0,
    bytes bigint NOT NULL DEFAULT 0,
    last_event bigint NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS buddy_records (
    session_id text NOT NULL REFERENCES buddy_sessions (id) ON DELETE CASCADE,
    seq bigint NOT NULL,
    line text NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE TABLE IF NOT EXISTS buddy_leases (
    session_id text PRIMARY KEY REFERENCES buddy_sessions (id) ON DELETE CASCADE,
    holder text NOT NULL,
    expires timestamptz NOT NULL
);
CREATE TABLE IF NOT EXISTS buddy_events (
    session_id text NOT NULL REFERENCES buddy_sessions (id) ON DELETE CASCADE,
    id bigint NOT NULL,
    data text NOT NULL,
    PRIMARY KEY (session_id, id)
);
CREATE TABLE IF NOT EXISTS buddy_checkpoints (
    session_id text NOT NULL REFERENCES buddy_sessions (id) ON DELETE CASCADE,
    seq bigint NOT NULL,
    turn text NOT NULL,
    path text NOT NULL,
    record text NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE TABLE IF NOT EXISTS buddy_checkpoint_blobs (
    session_id text NOT NULL REFERENCES buddy_sessions (id) ON DELETE CASCADE,
    sha256 text NOT NULL,
    content bytea NOT NULL,
    PRIMARY KEY (session_id, sha256)
);
CREATE TABLE IF NOT EXISTS buddy_images (
    session_id text NOT NULL REFERENCES buddy_sessions (id) ON DELETE CASCADE,
    name text NOT NULL,
    content bytea NOT NULL,
    PRIMARY KEY (session_id, name)
);
-- A team's facts, read and written by serve/team_pg.rs: who made each
-- session, the runs each user has going, what their runs cost per UTC day.
ALTER TABLE buddy_sessions ADD COLUMN IF NOT EXISTS owner text;
CREATE INDEX IF NOT EXISTS buddy_sessions_owner ON buddy_sessions (owner);
CREATE TABLE IF NOT EXISTS buddy_runs (
    user_name text NOT NULL,
    place integer NOT NULL,
    session_id text NOT NULL,
    instance text NOT NULL,
    expires timestamptz NOT NULL,
    PRIMARY KEY (user_name, place)
);
CREATE TABLE IF NOT EXISTS buddy_spending (
    user_name text NOT NULL,
    day bigint NOT NULL,
    usd double precision NOT NULL DEFAULT 0,
    PRIMARY KEY (user_name, day)
);
";

/// Creates what is missing and checks the version.
pub async fn migrate(db: &Db) -> Result<(), DbError> {
    let version = db
        .call_async(|c| async move {
            c.batch_execute(&format!(
                "BEGIN; SELECT pg_advisory_xact_lock({MIGRATION_LOCK}); {TABLES}
                 INSERT INTO buddy_schema (version) SELECT {VERSION}
                     WHERE NOT EXISTS (SELECT 1 FROM buddy_schema);
                 UPDATE buddy_schema SET version = {VERSION} WHERE version < {VERSION};
                 COMMIT;"
            ))
            .await?;
            let row = c
                .query_one("SELECT max(version) FROM buddy_schema", &[])
                .await?;
            Ok(row.get::<_, Option<i32>>(0).unwrap_or(VERSION))
        })
        .await?;
    if version > VERSION {
        return Err(format!(
            "the session tables are version {version}, newer than this buddy's {VERSION}: upgrade buddy"
        ));
    }
    Ok(())
}
