//! MCP over stdio: the end of stdin is the client leaving, and ends its session at once.

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};
use tokio_util::sync::CancellationToken;

/// Reads through `inner`; cancels `ended` when it reaches its end or fails, so the
/// session's running calls are interrupted as the client goes, not seconds later.
pub(super) struct EndOnEof<R> {
    inner: R,
    ended: CancellationToken,
}

impl<R> EndOnEof<R> {
    pub(super) fn new(inner: R, ended: CancellationToken) -> EndOnEof<R> {
        EndOnEof { inner, ended }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for EndOnEof<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let wanted = buf.remaining() > 0;
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        match &polled {
            Poll::Ready(Ok(())) if wanted && buf.filled().len() == before => self.ended.cancel(),
            Poll::Ready(Err(_)) => self.ended.cancel(),
            _ => {}
        }
        polled
    }
}
