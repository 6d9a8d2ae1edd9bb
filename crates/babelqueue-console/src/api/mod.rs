//! The admin API under `/api/v1`, JSON in and out; the pages call the same functions, so a
//! script can do whatever a page does. The OpenAPI document ([`ApiDoc`]) is generated from
//! these handlers' annotations and served at `/api/v1/openapi.json`.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, OpenApi, ToSchema};

use crate::Console;
use crate::actions::{self, ActionReport, ItemResult, RedriveRequest, RemoveRequest, RetryRequest};
use crate::error::ConsoleError;
use crate::sampler::{self, Point};
use crate::scan::{self, Group, Groups, Page};
use crate::security::Auth;
use crate::view::{EntryDetail, EntryView, Filter, Member};
use crate::workers::{QueueRates, WorkerStatus};

mod queues;

pub(crate) use queues::{QueueRow, rows};

/// The OpenAPI document of `/api/v1`.
#[derive(Debug, OpenApi)]
#[openapi(
    info(
        title = "BabelQueue console admin API",
        description = "Queues, dead letters and the actions on them, as the web console of \
                       `babelqueue serve` shows them. With BABELQUEUE_ADMIN_TOKEN set, every \
                       call needs `Authorization: Bearer TOKEN`; without it (a loopback \
                       listener), every POST needs the `x-csrf-token` header from GET /api/v1/session.",
        license(name = "MIT OR Apache-2.0")
    ),
    paths(
        queues::list_queues,
        workers,
        session,
        dead_letters,
        dead_letter,
        groups,
        history,
        retry,
        remove,
        redrive,
    ),
    components(schemas(
        QueueRow,
        QueueRates,
        WorkerStatus,
        SessionInfo,
        Page,
        EntryView,
        EntryDetail,
        Member,
        Groups,
        Group,
        Point,
        RetryRequest,
        RemoveRequest,
        RedriveRequest,
        ActionReport,
        ItemResult,
        ApiError
    ))
)]
pub struct ApiDoc;

/// An error answer.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ApiError {
    /// What went wrong (never a secret).
    error: String,
}

impl IntoResponse for ConsoleError {
    fn into_response(self) -> Response {
        (
            self.status(),
            Json(ApiError {
                error: self.to_string(),
            }),
        )
            .into_response()
    }
}

/// Who is asking, and what the console allows.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct SessionInfo {
    /// `token` or `local`.
    who: String,
    /// The CSRF token POSTs send in `x-csrf-token` (`null` with a bearer token: not needed).
    csrf: Option<String>,
    /// Whether every action is refused.
    read_only: bool,
}

/// Who is asking and the CSRF token to send with actions.
#[utoipa::path(get, path = "/api/v1/session", tag = "session",
    responses((status = 200, body = SessionInfo)))]
async fn session(
    State(console): State<Console>,
    Extension(auth): Extension<Auth>,
) -> Json<SessionInfo> {
    Json(SessionInfo {
        who: auth.who.0.to_owned(),
        csrf: auth.csrf,
        read_only: console.is_read_only(),
    })
}

/// The listing's query: the filter, the cursor and the page size. Every field is text, so an
/// HTML form's empty field reads as "not set".
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ListQuery {
    /// The URN contains this text.
    pub(crate) urn: Option<String>,
    /// `dead_letter.reason` is exactly this (`failed`, `unknown_urn`, `poison`).
    pub(crate) reason: Option<String>,
    /// The cause fingerprint is exactly this, or the error text contains it.
    pub(crate) cause: Option<String>,
    /// Failed at least this many seconds ago.
    pub(crate) older_than: Option<String>,
    /// Failed at most this many seconds ago.
    pub(crate) newer_than: Option<String>,
    /// The position to start at (a page's `next`); 0 by default.
    pub(crate) from: Option<String>,
    /// The page size, 1 to 500; 50 by default.
    pub(crate) limit: Option<String>,
}

fn number(value: Option<&str>, name: &str) -> Result<Option<u64>, ConsoleError> {
    match value.map(str::trim).filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(v) => v.parse().map(Some).map_err(|_| {
            ConsoleError::BadRequest(format!("{name} must be a whole number, got {v:?}"))
        }),
    }
}

fn size(value: Option<u64>, default: usize) -> usize {
    value.map_or(default, |v| usize::try_from(v).unwrap_or(usize::MAX))
}

impl ListQuery {
    pub(crate) fn filter(&self) -> Result<Filter, ConsoleError> {
        Ok(Filter {
            urn: self.urn.clone(),
            reason: self.reason.clone(),
            cause: self.cause.clone(),
            older_than: number(self.older_than.as_deref(), "older_than")?,
            newer_than: number(self.newer_than.as_deref(), "newer_than")?,
        })
    }

    pub(crate) fn from(&self) -> Result<usize, ConsoleError> {
        Ok(size(number(self.from.as_deref(), "from")?, 0))
    }

    pub(crate) fn limit(&self) -> Result<usize, ConsoleError> {
        Ok(size(number(self.limit.as_deref(), "limit")?, 50))
    }

    /// One page of the dead-letter queue of `queue` of source `source`.
    pub(crate) async fn page(
        &self,
        console: &Console,
        source: usize,
        queue: &str,
    ) -> Result<Page, ConsoleError> {
        let (src, watched) = console.queue(source, queue)?;
        scan::page(src, watched, &self.filter()?, self.from()?, self.limit()?).await
    }
}

/// A page of the dead-letter queue of a watched queue, filtered; never the whole queue.
#[utoipa::path(get, path = "/api/v1/queues/{source}/{queue}/dead-letters", tag = "dead letters",
    params(("source" = usize, Path, description = "the broker's index (0 = the first URL)"),
           ("queue" = String, Path, description = "the watched queue"), ListQuery),
    responses((status = 200, body = Page), (status = 404, body = ApiError)))]
async fn dead_letters(
    State(console): State<Console>,
    Path((source, queue)): Path<(usize, String)>,
    Query(query): Query<ListQuery>,
) -> Result<Json<Page>, ConsoleError> {
    Ok(Json(query.page(&console, source, &queue).await?))
}

/// Where to look for an entry first.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct At {
    /// The position a page showed it at (a hint: the entry is looked for from the head when
    /// it has moved).
    pub(crate) at: Option<usize>,
}

/// One dead-letter entry: envelope pretty-printed, facts, meta, raw bytes.
#[utoipa::path(get, path = "/api/v1/queues/{source}/{queue}/dead-letters/{id}", tag = "dead letters",
    params(("source" = usize, Path), ("queue" = String, Path), ("id" = String, Path), At),
    responses((status = 200, body = EntryDetail), (status = 404, body = ApiError)))]
async fn dead_letter(
    State(console): State<Console>,
    Path((source, queue, id)): Path<(usize, String, String)>,
    Query(at): Query<At>,
) -> Result<Json<EntryDetail>, ConsoleError> {
    let (src, watched) = console.queue(source, &queue)?;
    Ok(Json(scan::find(src, watched, &id, at.at).await?))
}

/// How many entries to group.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct Scan {
    /// Look at this many entries from the head (10 000 by default, 100 000 at most).
    pub(crate) scan: Option<usize>,
}

impl Scan {
    pub(crate) fn value(&self) -> usize {
        self.scan.unwrap_or(scan::GROUP_SCAN).clamp(1, 100_000)
    }
}

/// The dead letters grouped by cause fingerprint, largest group first.
#[utoipa::path(get, path = "/api/v1/queues/{source}/{queue}/groups", tag = "dead letters",
    params(("source" = usize, Path), ("queue" = String, Path), Scan),
    responses((status = 200, body = Groups), (status = 404, body = ApiError)))]
async fn groups(
    State(console): State<Console>,
    Path((source, queue)): Path<(usize, String)>,
    Query(scan): Query<Scan>,
) -> Result<Json<Groups>, ConsoleError> {
    let (src, watched) = console.queue(source, &queue)?;
    Ok(Json(scan::groups(src, watched, scan.value()).await?))
}

/// The samples of the last hour (ready, in flight, dead letters).
#[utoipa::path(get, path = "/api/v1/queues/{source}/{queue}/history", tag = "queues",
    params(("source" = usize, Path), ("queue" = String, Path)),
    responses((status = 200, body = [Point]), (status = 404, body = ApiError)))]
async fn history(
    State(console): State<Console>,
    Path((source, queue)): Path<(usize, String)>,
) -> Result<Json<Vec<Point>>, ConsoleError> {
    let index = sampler::index(&console, source, &queue)
        .ok_or_else(|| ConsoleError::NotFound(format!("{source}/{queue}")))?;
    Ok(Json(console.inner.history.points(index)))
}

/// Retries entries (by id, or every entry of a cause) to their original queues.
#[utoipa::path(post, path = "/api/v1/queues/{source}/{queue}/retry", tag = "actions",
    params(("source" = usize, Path), ("queue" = String, Path)),
    request_body = RetryRequest,
    responses((status = 200, body = ActionReport), (status = 403, body = ApiError)))]
async fn retry(
    State(console): State<Console>,
    Extension(auth): Extension<Auth>,
    Path((source, queue)): Path<(usize, String)>,
    Json(request): Json<RetryRequest>,
) -> Result<Json<ActionReport>, ConsoleError> {
    Ok(Json(
        actions::retry(&console, &auth.who, source, &queue, request).await?,
    ))
}

/// Removes entries by id.
#[utoipa::path(post, path = "/api/v1/queues/{source}/{queue}/remove", tag = "actions",
    params(("source" = usize, Path), ("queue" = String, Path)),
    request_body = RemoveRequest,
    responses((status = 200, body = ActionReport), (status = 403, body = ApiError)))]
async fn remove(
    State(console): State<Console>,
    Extension(auth): Extension<Auth>,
    Path((source, queue)): Path<(usize, String)>,
    Json(request): Json<RemoveRequest>,
) -> Result<Json<ActionReport>, ConsoleError> {
    Ok(Json(
        actions::remove(&console, &auth.who, source, &queue, request).await?,
    ))
}

/// Redrives the dead-letter queue (or its first `max` entries), with a dry run and a rate.
#[utoipa::path(post, path = "/api/v1/queues/{source}/{queue}/redrive", tag = "actions",
    params(("source" = usize, Path), ("queue" = String, Path)),
    request_body = RedriveRequest,
    responses((status = 200, body = ActionReport), (status = 403, body = ApiError)))]
async fn redrive(
    State(console): State<Console>,
    Extension(auth): Extension<Auth>,
    Path((source, queue)): Path<(usize, String)>,
    Json(request): Json<RedriveRequest>,
) -> Result<Json<ActionReport>, ConsoleError> {
    Ok(Json(
        actions::redrive_all(&console, &auth.who, source, &queue, request).await?,
    ))
}

/// The workers' metrics endpoints (`--worker-metrics`) and what each said last.
#[utoipa::path(get, path = "/api/v1/workers", tag = "queues",
    responses((status = 200, body = [WorkerStatus])))]
async fn workers(State(console): State<Console>) -> Json<Vec<WorkerStatus>> {
    Json(console.inner.workers.statuses())
}

async fn openapi() -> impl IntoResponse {
    match ApiDoc::openapi().to_pretty_json() {
        Ok(json) => (
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            json,
        )
            .into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

pub(crate) fn routes() -> Router<Console> {
    Router::new()
        .route("/api/v1/openapi.json", get(openapi))
        .route("/api/v1/session", get(session))
        .route("/api/v1/queues", get(queues::list_queues))
        .route("/api/v1/workers", get(workers))
        .route(
            "/api/v1/queues/{source}/{queue}/dead-letters",
            get(dead_letters),
        )
        .route(
            "/api/v1/queues/{source}/{queue}/dead-letters/{id}",
            get(dead_letter),
        )
        .route("/api/v1/queues/{source}/{queue}/groups", get(groups))
        .route("/api/v1/queues/{source}/{queue}/history", get(history))
        .route("/api/v1/queues/{source}/{queue}/retry", post(retry))
        .route("/api/v1/queues/{source}/{queue}/remove", post(remove))
        .route("/api/v1/queues/{source}/{queue}/redrive", post(redrive))
}
