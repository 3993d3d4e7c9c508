//! A real `redis-server` for a test: started on a free loopback port with nothing kept on
//! disk (`--save '' --appendonly no`), stopped (or paused, or killed) when the test says,
//! and killed on drop. A missing `redis-server` skips the test, or fails it under
//! `RLM_REQUIRE_TOOLS=1` (`external.rs`).

use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::external;

/// One `redis-server` process of this test's own.
pub struct RedisServer {
    child: Child,
    port: u16,
    password: Option<String>,
    paused: bool,
}

impl RedisServer {
    /// A server without a password; `None` (the test skips) when there is no
    /// `redis-server`.
    pub fn start() -> Option<RedisServer> {
        RedisServer::launch(None)
    }

    /// A server that asks for `password` (`--requirepass`).
    pub fn with_password(password: &str) -> Option<RedisServer> {
        RedisServer::launch(Some(password))
    }

    fn launch(password: Option<&str>) -> Option<RedisServer> {
        let program = external::redis_server()?;
        // A port the OS just gave out and took back: free, barring a race no test makes.
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let mut command = Command::new(program);
        command
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(password) = password {
            command.args(["--requirepass", password]);
        }
        let child = command.spawn().expect("redis-server starts");
        let server = RedisServer {
            child,
            port,
            password: password.map(str::to_string),
            paused: false,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "redis-server listens on {port}");
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(server)
    }

    /// `redis://[:PASSWORD@]127.0.0.1:PORT/0`, the server's own password in it if it has one.
    pub fn url(&self) -> String {
        match &self.password {
            Some(password) => format!("redis://:{password}@127.0.0.1:{}/0", self.port),
            None => format!("redis://127.0.0.1:{}/0", self.port),
        }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A client connection to it, to look at or plant keys.
    pub fn client(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|client| client.get_connection())
            .expect("a connection to the test's redis-server")
    }

    /// Kills it at once, as a crash would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Stops it answering (SIGSTOP) without closing its connections, as a server too
    /// slow would; [`RedisServer::resume`] or drop ends it.
    pub fn pause(&mut self) {
        self.signal("-STOP");
        self.paused = true;
    }

    /// Lets a paused server answer again.
    pub fn resume(&mut self) {
        self.signal("-CONT");
        self.paused = false;
    }

    fn signal(&self, signal: &str) {
        let sent = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success(), "kill {signal}");
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if self.paused {
            self.resume();
        }
        self.kill();
    }
}
