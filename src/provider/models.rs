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
            Some(ListedModel { id, owned_by })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_of_every_kind_of_server_parse() {
        let llama = br#"{"models":[{"name":"smollm2"}],"object":"list","data":[{"id":"smollm2","object":"model","owned_by":"llamacpp"}]}"#;
        assert_eq!(
            parse_model_list(llama).unwrap(),
            vec![ListedModel {
                id: "smollm2".into(),
                owned_by: Some("llamacpp".into())
            }]
        );
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
