//! AWS keys for Bedrock, as AWS's SDKs find them: the config's `env:`
//! references, the standard environment variables, or a web identity
//! token file exchanged at STS for a role's keys (EKS's IAM roles for
//! service accounts), refreshed before they expire.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use futures_util::FutureExt;
use futures_util::future::BoxFuture;

use switchyard_policies::calendar::days_from_civil;

use super::sigv4::Keys;
use crate::credentials::{CredentialStatus, Refresher, Source, fetch_failure};
use crate::error::AdapterError;
use crate::percent;
use crate::upstream::{Link, Upstream};

/// Keys held for the backend's life, or a role's, refreshed.
pub enum AwsCredentials {
    Static(Keys),
    WebIdentity(Arc<Refresher<WebIdentity>>),
}

impl AwsCredentials {
    /// From the environment as AWS's SDKs read it: `AWS_ACCESS_KEY_ID` and
    /// `AWS_SECRET_ACCESS_KEY` (with `AWS_SESSION_TOKEN`), else
    /// `AWS_WEB_IDENTITY_TOKEN_FILE` with `AWS_ROLE_ARN`.
    pub fn from_environment(region: &str, link: Link<'_>) -> Result<Self, AdapterError> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        if let (Some(id), Some(secret)) = (var("AWS_ACCESS_KEY_ID"), var("AWS_SECRET_ACCESS_KEY")) {
            return Ok(AwsCredentials::Static(Keys {
                access_key_id: id,
                secret_access_key: secret,
                session_token: var("AWS_SESSION_TOKEN").or_else(|| var("AWS_SECURITY_TOKEN")),
            }));
        }
        if let (Some(token_file), Some(role_arn)) =
            (var("AWS_WEB_IDENTITY_TOKEN_FILE"), var("AWS_ROLE_ARN"))
        {
            let sts = var("AWS_ENDPOINT_URL_STS")
                .unwrap_or_else(|| format!("https://sts.{region}.amazonaws.com"));
            let session_name = var("AWS_ROLE_SESSION_NAME").unwrap_or_else(|| {
                let now = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                format!("switchyard-{now}")
            });
            return Ok(AwsCredentials::WebIdentity(Refresher::new(WebIdentity {
                role_arn,
                session_name,
                token_file,
                sts: Upstream::new(sts.trim_end_matches('/'), Vec::new(), link)?,
            })));
        }
        Err(AdapterError::Internal {
            message: "no AWS credentials: set access_key_id and secret_access_key, the AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY variables, or AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN".into(),
        })
    }

    pub async fn keys(&self) -> Result<Keys, AdapterError> {
        match self {
            AwsCredentials::Static(keys) => Ok(keys.clone()),
            AwsCredentials::WebIdentity(refresher) => refresher.get().await,
        }
    }

    pub fn status(&self) -> Option<CredentialStatus> {
        match self {
            AwsCredentials::Static(_) => None,
            AwsCredentials::WebIdentity(refresher) => Some(refresher.status()),
        }
    }
}

/// STS's AssumeRoleWithWebIdentity: the token file's token for a role's
/// keys. The call is not signed; the token is the proof. The file is read
/// again on every refresh, as Kubernetes rotates it.
pub struct WebIdentity {
    role_arn: String,
    session_name: String,
    token_file: String,
    sts: Upstream,
}

impl WebIdentity {
    async fn assume(&self) -> Result<(Keys, Duration), String> {
        let token = tokio::fs::read_to_string(&self.token_file)
            .await
            .map_err(|_| {
                format!(
                    "the web identity token file {} could not be read",
                    self.token_file
                )
            })?;
        let form = format!(
            "Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn={}&RoleSessionName={}&WebIdentityToken={}",
            percent::encode(&self.role_arn, percent::unreserved),
            percent::encode(&self.session_name, percent::unreserved),
            percent::encode(token.trim(), percent::unreserved),
        );
        let answer = self
            .sts
            .call_bytes(
                "/",
                "application/x-www-form-urlencoded",
                Bytes::from(form),
                &[],
            )
            .await
            .map_err(|err| fetch_failure("STS", &err))?;
        let xml = String::from_utf8_lossy(&answer);
        let field = |name: &str| element(&xml, name).ok_or(format!("STS's answer holds no {name}"));
        let keys = Keys {
            access_key_id: field("AccessKeyId")?,
            secret_access_key: field("SecretAccessKey")?,
            session_token: Some(field("SessionToken")?),
        };
        let expires = field("Expiration")?;
        let expires = unix_seconds(&expires).ok_or("STS's Expiration is not a date")?;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Ok((
            keys,
            Duration::from_secs(expires.saturating_sub(now).max(1)),
        ))
    }
}

impl Source for WebIdentity {
    type Credential = Keys;

    fn name(&self) -> &'static str {
        "web_identity"
    }

    fn fetch(&self) -> BoxFuture<'_, Result<(Keys, Duration), String>> {
        self.assume().boxed()
    }
}

/// The text of the first `<name>...</name>` element, unescaped: STS's
/// answers are small and flat, which is all this reads.
fn element(xml: &str, name: &str) -> Option<String> {
    let open = format!("<{name}>");
    let start = xml.find(&open)? + open.len();
    let end = start + xml[start..].find(&format!("</{name}>"))?;
    Some(
        xml[start..end]
            .trim()
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&apos;", "'")
            .replace("&amp;", "&"),
    )
}

/// Seconds since 1970 of an ISO 8601 UTC time (`2026-12-04T05:45:16Z`,
/// fractions of a second ignored).
fn unix_seconds(text: &str) -> Option<u64> {
    let number = |range: std::ops::Range<usize>| text.get(range)?.parse::<i64>().ok();
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    let (hour, minute, second) = (number(11..13)?, number(14..16)?, number(17..19)?);
    let valid = (1..=12).contains(&month) && (1..=31).contains(&day) && hour < 24 && minute < 60;
    let seconds = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second;
    valid.then(|| u64::try_from(seconds).ok()).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sts_answers_are_read_by_element() {
        let xml = "<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult><Credentials>\
            <AccessKeyId>ASIAEXAMPLE</AccessKeyId><SecretAccessKey>s3cr&amp;t</SecretAccessKey>\
            <SessionToken>tok</SessionToken><Expiration>2026-12-04T05:45:16Z</Expiration>\
            </Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>";
        assert_eq!(element(xml, "SecretAccessKey").as_deref(), Some("s3cr&t"));
        assert_eq!(element(xml, "Nothing"), None);
        assert_eq!(unix_seconds("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            unix_seconds("2026-12-04T05:45:16.123Z"),
            Some(1_796_363_116)
        );
        assert_eq!(unix_seconds("soon"), None);
        assert_eq!(
            percent::encode("arn:aws:iam::1:role/x y", percent::unreserved),
            "arn%3Aaws%3Aiam%3A%3A1%3Arole%2Fx%20y"
        );
    }
}
