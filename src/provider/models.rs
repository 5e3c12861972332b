//! The list of models a server offers (`GET {base_url}/models`). OpenAI,
//! Anthropic, Ollama, llama.cpp, LM Studio and vLLM all answer it with
//! `{"data": [{"id": …}, …]}`; only the headers differ, and those come from
//! the profile's protocol.

use super::ApiError;
use serde_json::Value;

/// One model a server lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedModel {
    pub id: String,
    /// Who the server says owns it; local servers put their own name here
    /// (`llamacpp`, `vllm`), which tells them apart.
    pub owned_by: Option<String>,
    /// The context window the server says the model runs with, when it says.
    pub context: Option<u64>,
}

/// The context window in one entry of a model list, from the fields servers
/// put it in: llama.cpp's `meta.n_ctx` (the window it was started with, not
/// the model's trained one), vLLM's `max_model_len`, OpenRouter's
/// `context_length`, LM Studio's `loaded_context_length` or
/// `max_context_length`.
fn context_of(m: &Value) -> Option<u64> {
    [
        "/meta/n_ctx",
        "/max_model_len",
        "/loaded_context_length",
        "/context_length",
        "/max_context_length",
    ]
    .iter()
    .find_map(|p| m.pointer(p).and_then(Value::as_u64))
    .filter(|n| *n > 0)
}

/// The models in a `/models` body, in the server's order.
pub fn parse_model_list(body: &[u8]) -> Result<Vec<ListedModel>, ApiError> {
    let value: Value = serde_json::from_slice(body).map_err(|_| {
        let text = String::from_utf8_lossy(&body[..body.len().min(120)]).into_owned();
        ApiError::InvalidResponse(format!("not a model list: {}", text.trim()))
    })?;
    let Some(data) = value.get("data").and_then(Value::as_array) else {
        return Err(ApiError::InvalidResponse(
            "not a model list: no `data` array".into(),
        ));
    };
    Ok(data
        .iter()
        .filter_map(|m| {
            let id = m.get("id")?.as_str()?.to_string();
            let owned_by = m.get("owned_by").and_then(Value::as_str).map(String::from);
            Some(ListedModel {
                id,
                owned_by,
                context: context_of(m),
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_of_every_kind_of_server_parse() {
        let llama = br#"{"models":[{"name":"smollm2"}],"object":"list","data":[{"id":"smollm2","object":"model","owned_by":"llamacpp","meta":{"n_ctx":4096,"n_ctx_train":8192}}]}"#;
        assert_eq!(
            parse_model_list(llama).unwrap(),
            vec![ListedModel {
                id: "smollm2".into(),
                owned_by: Some("llamacpp".into()),
                context: Some(4096),
            }]
        );
        let vllm = br#"{"object":"list","data":[{"id":"qwen","object":"model","owned_by":"vllm","max_model_len":32768}]}"#;
        assert_eq!(parse_model_list(vllm).unwrap()[0].context, Some(32768));
        let anthropic = br#"{"data":[{"type":"model","id":"claude-sonnet-4-5","display_name":"Claude"}],"has_more":false}"#;
        assert_eq!(
            parse_model_list(anthropic).unwrap()[0].id,
            "claude-sonnet-4-5"
        );
        assert!(parse_model_list(br#"{"data":[]}"#).unwrap().is_empty());
        let err = parse_model_list(b"<html>not found</html>").unwrap_err();
        assert!(err.to_string().contains("not a model list"), "{err}");
        assert!(parse_model_list(br#"{"error":"x"}"#).is_err());
    }
}
