//! `testserver-list`: the 100,000-object list served whole and in pages of
//! 500 (at the exact resourceVersion of the first page, so every page is
//! read from the same state through the history, as a reflector's paged
//! list is), read undecoded by a plain hyper client; beside each, the same
//! bytes from the bare reference server. `client-list-decode`: the same
//! list through `kcontrol_client::Api::<ConfigMap>::list` against a bare
//! `serde_json::from_slice` of its bytes.

use std::hint::black_box;
use std::net::SocketAddr;
use std::time::Instant;

use bytes::Bytes;
use k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_client::{Api, Client, Config, ListParams, ObjectList};
use serde_json::json;

use super::conn::{continue_token, Conn};
use super::reference::Reference;
use super::{best, mb_per_sec, OBJECTS, RUNS};
use crate::fixtures::NAMESPACE;
use crate::report::{row, Report};

/// Objects a page of the paged list holds.
const PAGE: usize = 500;

/// Runs the list rows against the server at `addr`, whose configmaps in
/// the bench namespace are current at `rv`.
pub async fn bench(report: &mut Report, addr: SocketAddr, rv: u64) -> Result<(), String> {
    let path = format!("/api/v1/namespaces/{NAMESPACE}/configmaps");
    let body = unpaged(report, addr, &path).await?;
    paged(report, addr, &path, rv).await?;
    decode(report, addr, body).await
}

/// The whole list in one answer; returns its bytes for the decode row.
async fn unpaged(report: &mut Report, addr: SocketAddr, path: &str) -> Result<Bytes, String> {
    let mut conn = Conn::open(addr).await?;
    let body = conn.fetch(path).await?;
    let served = best(RUNS, async || {
        let start = Instant::now();
        let drained = conn.drain(path).await?;
        Ok((drained.bytes, start.elapsed().as_secs_f64()))
    })
    .await?;
    check_len(served.value, body.len())?;
    let reference = Reference::start(vec![body.clone()]).await?;
    let mut bare = Conn::open(reference.addr()).await?;
    let referenced = best(RUNS, async || {
        let start = Instant::now();
        let drained = bare.drain("/part/0").await?;
        Ok((drained.bytes, start.elapsed().as_secs_f64()))
    })
    .await?;
    check_len(referenced.value, body.len())?;
    list_row(
        report,
        "unpaged",
        1,
        body.len(),
        served.secs,
        referenced.secs,
    );
    Ok(body)
}

/// The list in pages of [`PAGE`], following continue tokens.
async fn paged(report: &mut Report, addr: SocketAddr, path: &str, rv: u64) -> Result<(), String> {
    let first = format!("{path}?limit={PAGE}&resourceVersion={rv}&resourceVersionMatch=Exact");
    let mut conn = Conn::open(addr).await?;
    let pages = fetch_pages(&mut conn, path, &first).await?;
    let expected_pages = OBJECTS.div_ceil(PAGE);
    if pages.len() != expected_pages {
        return Err(format!(
            "paged list: {} pages, expected {expected_pages}",
            pages.len()
        ));
    }
    let bytes: usize = pages.iter().map(Bytes::len).sum();
    let served = best(RUNS, async || {
        let start = Instant::now();
        let walked = walk(&mut conn, |page, token| match (page, token) {
            (0, _) => first.clone(),
            (_, token) => format!("{path}?limit={PAGE}&continue={token}"),
        })
        .await?;
        Ok((walked, start.elapsed().as_secs_f64()))
    })
    .await?;
    check_len(served.value.0, bytes)?;
    check_pages(served.value.1, expected_pages)?;
    let reference = Reference::start(pages).await?;
    let mut bare = Conn::open(reference.addr()).await?;
    let referenced = best(RUNS, async || {
        let start = Instant::now();
        let walked = walk(&mut bare, |page, _| format!("/part/{page}")).await?;
        Ok((walked, start.elapsed().as_secs_f64()))
    })
    .await?;
    check_len(referenced.value.0, bytes)?;
    list_row(
        report,
        "limit=500",
        expected_pages,
        bytes,
        served.secs,
        referenced.secs,
    );
    Ok(())
}

/// Every page of a paged list, kept.
async fn fetch_pages(conn: &mut Conn, path: &str, first: &str) -> Result<Vec<Bytes>, String> {
    let mut pages = vec![conn.fetch(first).await?];
    while let Some(token) = pages
        .last()
        .map(|p| continue_token(p))
        .transpose()?
        .flatten()
    {
        if pages.len() > OBJECTS {
            return Err("paged list: continue tokens do not end".into());
        }
        pages.push(
            conn.fetch(&format!("{path}?limit={PAGE}&continue={token}"))
                .await?,
        );
    }
    Ok(pages)
}

/// Reads pages until one has no continue token; `next(page, token)` is
/// the path of page `page`. Returns the bytes and pages read.
async fn walk(
    conn: &mut Conn,
    next: impl Fn(usize, &str) -> String,
) -> Result<(usize, usize), String> {
    let (mut bytes, mut page, mut token) = (0usize, 0usize, String::new());
    loop {
        let drained = conn.drain(&next(page, &token)).await?;
        bytes += drained.bytes;
        page += 1;
        match continue_token(&drained.head)? {
            Some(t) if page <= OBJECTS => token = t,
            Some(_) => return Err("paged list: continue tokens do not end".into()),
            None => return Ok((bytes, page)),
        }
    }
}

fn check_len(got: usize, expected: usize) -> Result<(), String> {
    if got == expected {
        Ok(())
    } else {
        Err(format!("list of {got} bytes, expected {expected}"))
    }
}

fn check_pages(got: usize, expected: usize) -> Result<(), String> {
    if got == expected {
        Ok(())
    } else {
        Err(format!("paged list of {got} pages, expected {expected}"))
    }
}

fn list_row(
    report: &mut Report,
    paging: &str,
    requests: usize,
    bytes: usize,
    secs: f64,
    reference_secs: f64,
) {
    let rate = mb_per_sec(bytes, secs);
    let reference = mb_per_sec(bytes, reference_secs);
    report.row(row([
        ("scenario", json!("testserver-list")),
        ("paging", json!(paging)),
        ("objects", json!(OBJECTS)),
        ("requests", json!(requests)),
        ("bytes", json!(bytes)),
        ("seconds", json!(secs)),
        ("mb_per_sec", json!(rate)),
        ("reference_mb_per_sec", json!(reference)),
        ("ratio", json!(rate / reference)),
        ("measured", json!(format!("best of {RUNS}: GET over one keep-alive loopback HTTP/1.1 connection, body read by a plain hyper client and not decoded; reference: the same bytes served whole by a bare hyper server (one body per request) to the same client"))),
    ]));
}

/// `Api::<ConfigMap>::list` of the whole list against `from_slice` of
/// `body`, its bytes as served.
async fn decode(report: &mut Report, addr: SocketAddr, body: Bytes) -> Result<(), String> {
    // Each run times only the call: freeing 100,000 objects is not part of
    // decoding them.
    let mut bare_secs = f64::INFINITY;
    for _ in 0..RUNS {
        let start = Instant::now();
        let list: ObjectList<ConfigMap> =
            serde_json::from_slice(&body).map_err(|e| format!("the list does not decode: {e}"))?;
        bare_secs = bare_secs.min(start.elapsed().as_secs_f64());
        check_objects(black_box(list).items.len())?;
    }
    let url = format!("http://{addr}")
        .parse()
        .map_err(|e| format!("server URL: {e}"))?;
    let client = Client::try_from(Config::new(url).with_rate_limit(None))
        .map_err(|e| format!("client: {e}"))?;
    let api: Api<ConfigMap> = Api::namespaced(client, NAMESPACE);
    let mut api_secs = f64::INFINITY;
    for _ in 0..RUNS {
        let start = Instant::now();
        let list = api
            .list(&ListParams::default())
            .await
            .map_err(|e| format!("Api::list: {e}"))?;
        api_secs = api_secs.min(start.elapsed().as_secs_f64());
        check_objects(black_box(list).items.len())?;
    }
    report.row(row([
        ("scenario", json!("client-list-decode")),
        ("objects", json!(OBJECTS)),
        ("bytes", json!(body.len())),
        ("api_seconds", json!(api_secs)),
        ("api_objects_per_sec", json!(OBJECTS as f64 / api_secs)),
        ("from_slice_seconds", json!(bare_secs)),
        ("from_slice_objects_per_sec", json!(OBJECTS as f64 / bare_secs)),
        ("ratio", json!(api_secs / bare_secs)),
        ("measured", json!(format!("best of {RUNS}: Api::<ConfigMap>::list (no limit) against the testserver over loopback HTTP/1.1 (transfer + decode) vs serde_json::from_slice::<ObjectList<ConfigMap>> of the same bytes in memory; ratio = api / from_slice time"))),
    ]));
    Ok(())
}

fn check_objects(got: usize) -> Result<(), String> {
    if got == OBJECTS {
        Ok(())
    } else {
        Err(format!("decoded {got} objects, expected {OBJECTS}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;
    use kcontrol_testserver::TestServer;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn walks_every_page_of_a_real_list() {
        let server = TestServer::builder().start().await.unwrap();
        let objects = server.objects();
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}});
        objects.create("namespaces", "", ns).unwrap();
        let rv = objects
            .bulk_load(
                "configmaps",
                NAMESPACE,
                (0..1_200).map(|i| fixtures::configmap_value(i, 0)),
            )
            .unwrap();
        let path = format!("/api/v1/namespaces/{NAMESPACE}/configmaps");
        let first = format!("{path}?limit={PAGE}&resourceVersion={rv}&resourceVersionMatch=Exact");
        let mut conn = Conn::open(server.addr()).await.unwrap();
        let pages = fetch_pages(&mut conn, &path, &first).await.unwrap();
        assert_eq!(pages.len(), 3);
        let items: usize = pages
            .iter()
            .map(|p| {
                let v: serde_json::Value = serde_json::from_slice(p).unwrap();
                v["items"].as_array().unwrap().len()
            })
            .sum();
        assert_eq!(items, 1_200);
        let (bytes, walked) = walk(&mut conn, |page, token| match page {
            0 => first.clone(),
            _ => format!("{path}?limit={PAGE}&continue={token}"),
        })
        .await
        .unwrap();
        assert_eq!(walked, 3);
        assert_eq!(bytes, pages.iter().map(Bytes::len).sum::<usize>());
        server.shutdown().await;
    }
}
