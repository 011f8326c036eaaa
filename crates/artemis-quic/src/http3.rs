//! The replica's HTTP/3 side (h3 over quinn): every request gets one
//! small HTML page that names the replica, so a browser that fetched it
//! shows which replica the dispatcher chose.

use bytes::Bytes;
use h3::server::RequestResolver;

/// The page a replica serves for every path.
pub fn page(replica_id: u16) -> String {
    format!("<!DOCTYPE html><title>replica {replica_id}</title><p id=\"replica\">hello from replica {replica_id}</p>\n")
}

/// Answers the connection's requests until the client closes it.
pub(crate) async fn serve(connection: quinn::Connection, replica_id: u16) {
    let mut http = match h3::server::builder().build(h3_quinn::Connection::new(connection)).await {
        Ok(http) => http,
        Err(error) => return tracing::debug!(%error, "HTTP/3 setup failed"),
    };
    loop {
        match http.accept().await {
            Ok(Some(request)) => {
                tokio::spawn(answer(request, replica_id));
            }
            Ok(None) => return,
            Err(error) => return tracing::debug!(%error, "HTTP/3 connection ended"),
        }
    }
}

async fn answer(request: RequestResolver<h3_quinn::Connection, Bytes>, replica_id: u16) {
    let sent = async {
        let (_request, mut stream) = request.resolve_request().await?;
        let response = http::Response::builder()
            .status(http::StatusCode::OK)
            .header(http::header::CONTENT_TYPE, "text/html; charset=utf-8")
            .body(())
            .expect("a status and a static header make a valid response");
        stream.send_response(response).await?;
        stream.send_data(Bytes::from(page(replica_id))).await?;
        stream.finish().await?;
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
    };
    if let Err(error) = sent.await {
        tracing::debug!(%error, "HTTP/3 request failed");
    }
}
