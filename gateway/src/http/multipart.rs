//! `multipart/form-data` bodies (file uploads), read whole (within the
//! upload's limit) into their fields.

use bytes::Bytes;
use http::HeaderMap;
use http::header::CONTENT_TYPE;

use crate::error::GatewayError;

/// One field: its name, the file name a file field carries, its bytes.
struct Field {
    name: String,
    filename: Option<String>,
    data: Bytes,
}

/// A form's fields.
pub struct Form(Vec<Field>);

impl Form {
    /// A text field's value.
    pub fn text(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|f| f.name == name && f.filename.is_none())
            .and_then(|f| std::str::from_utf8(&f.data).ok())
    }

    /// A file field: its file name (`upload` when it gave none) and bytes.
    pub fn file(&self, name: &str) -> Option<(&str, &Bytes)> {
        self.0
            .iter()
            .find(|f| f.name == name && f.filename.is_some())
            .map(|f| (f.filename.as_deref().unwrap_or("upload"), &f.data))
    }
}

fn malformed(why: impl std::fmt::Display) -> GatewayError {
    GatewayError::InvalidField {
        param: "body".into(),
        message: format!("not a multipart form: {why}"),
    }
}

/// The fields of a `multipart/form-data` body.
pub async fn read_form(headers: &HeaderMap, body: Bytes) -> Result<Form, GatewayError> {
    let kind = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let boundary = multer::parse_boundary(kind).map_err(malformed)?;
    let stream = futures_util::stream::once(async move { Ok::<_, std::io::Error>(body) });
    let mut multipart = multer::Multipart::new(stream, boundary);
    let mut fields = Vec::new();
    while let Some(field) = multipart.next_field().await.map_err(malformed)? {
        let name = field.name().unwrap_or_default().to_owned();
        let filename = field.file_name().map(str::to_owned);
        let data = field.bytes().await.map_err(malformed)?;
        fields.push(Field {
            name,
            filename,
            data,
        });
    }
    Ok(Form(fields))
}
