//! The greeter service that the `grpc_server` example and `tests/grpc.rs` both serve. Include
//! it next to the protocol: `#[path = "common/greeter.rs"] mod greeter;` then
//! `#[path = "common/hello.rs"] mod hello;`.

use crate::greeter::greeter_server::Greeter;
use crate::greeter::{HelloReply, HelloRequest};
use tonic::{Request, Response, Status};

/// The greeter: answers `Hello, {name}!`.
pub struct Hello;

#[tonic::async_trait]
impl Greeter for Hello {
    async fn say_hello(
        &self,
        request: Request<HelloRequest>,
    ) -> Result<Response<HelloReply>, Status> {
        let message = format!("Hello, {}!", request.into_inner().name);
        Ok(Response::new(HelloReply { message }))
    }
}
