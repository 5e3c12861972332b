//! The client's files (`fs/read_text_file`, `fs/write_text_file`) as the
//! tools' `EditorFiles`: each read or write is a request to the client,
//! answered with the text of its buffer. Offered only when the client said,
//! in `initialize`, that it serves both.

use agent_client_protocol::v1::schema::{
    ClientCapabilities, ReadTextFileRequest, WriteTextFileRequest,
};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::Client;
use async_trait::async_trait;
use std::path::Path;
use std::sync::Arc;

use crate::tools::editor::EditorError;
pub use crate::tools::editor::EditorFiles as ClientFiles;

/// How long the client may take to answer a read or a write.
const ANSWER_TIME: std::time::Duration = std::time::Duration::from_secs(60);

struct AcpFiles {
    cx: ConnectionTo<Client>,
    session: String,
}

/// The client's files for `session`, when it offers reading and writing.
pub fn offered(
    caps: &ClientCapabilities,
    cx: &ConnectionTo<Client>,
    session: &str,
) -> Option<Arc<dyn ClientFiles>> {
    (caps.fs.read_text_file && caps.fs.write_text_file).then(|| {
        Arc::new(AcpFiles {
            cx: cx.clone(),
            session: session.to_string(),
        }) as Arc<dyn ClientFiles>
    })
}

#[async_trait]
impl ClientFiles for AcpFiles {
    async fn read(&self, path: &Path) -> Result<String, EditorError> {
        let request = ReadTextFileRequest::new(self.session.clone(), path.to_path_buf());
        match tokio::time::timeout(ANSWER_TIME, self.cx.send_request(request).block_task()).await {
            Ok(Ok(r)) => Ok(r.content),
            Ok(Err(e)) => Err(EditorError::Read(e.message)),
            Err(_) => Err(EditorError::ReadTimeout),
        }
    }

    async fn write(&self, path: &Path, content: &str) -> Result<(), EditorError> {
        let request = WriteTextFileRequest::new(
            self.session.clone(),
            path.to_path_buf(),
            content.to_string(),
        );
        match tokio::time::timeout(ANSWER_TIME, self.cx.send_request(request).block_task()).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(EditorError::Write(e.message)),
            Err(_) => Err(EditorError::WriteTimeout),
        }
    }
}
