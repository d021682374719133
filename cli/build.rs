//! Generates the Rust code of Envoy's rate limit service (`envoy.service.ratelimit.v3`) from
//! the protos vendored in `proto/`, for the `server` feature; `src/serve/proto.rs` includes it.
//!
//! No `protoc` is needed: `protox` compiles the protos in Rust, `tonic-prost-build` turns
//! the descriptors into prost messages, a tonic server and a tonic client, and `pbjson-build`
//! into the messages' serde impls in proto3 JSON.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Also keeps cargo from running this again when any other file of the package changes.
    println!("cargo::rerun-if-changed=proto");
    #[cfg(feature = "server")]
    rls::generate()?;
    Ok(())
}

#[cfg(feature = "server")]
mod rls {
    use prost_types::{DescriptorProto, FileDescriptorProto, FileDescriptorSet};
    use std::collections::BTreeSet;
    use std::error::Error;

    /// The include root: every import in the vendored files is relative to it.
    const PROTO_ROOT: &str = "proto";
    /// The one file whose service is generated.
    const RLS: &str = "envoy/service/ratelimit/v3/rls.proto";
    /// The package of the well-known types, which map to `pbjson-types`.
    const WELL_KNOWN: &str = "google.protobuf";
    /// The well-known types in Rust: prost messages with serde impls in proto3 JSON.
    const WELL_KNOWN_IN_RUST: &str = "::pbjson_types";
    /// The prefix of the packages given serde impls: Envoy's, those that `rls.proto` reaches.
    const ENVOY: &str = ".envoy";

    /// Writes the code of each package that `rls.proto` reaches to `OUT_DIR`: its prost
    /// messages and tonic service in `<package>.rs`, their serde impls in `<package>.serde.rs`.
    pub(crate) fn generate() -> Result<(), Box<dyn Error>> {
        let descriptors = keep_what_rls_uses(protox::compile([RLS], [PROTO_ROOT])?);
        // No extern path for pbjson: its code names no well-known type, it calls their impls.
        let mut json = pbjson_build::Builder::new();
        for file in &descriptors.file {
            json.register_file_descriptor(file.clone());
        }
        json.build(&[ENVOY])?;
        tonic_prost_build::configure()
            // A client generic over any gRPC service; the tests bring tonic's `Channel` themselves.
            .build_transport(false)
            // The well-known types are `pbjson-types`, not `prost-types` (no serde impls): prost
            // maps them to `prost-types` unless it compiles them, which the extern path skips.
            .compile_well_known_types(true)
            .extern_path(format!(".{WELL_KNOWN}"), WELL_KNOWN_IN_RUST)
            .emit_rerun_if_changed(false)
            .compile_fds(descriptors)?;
        Ok(())
    }

    /// Drops every message and enum that `rls.proto`'s service does not reach, and every file
    /// left empty, so that of `base.proto` only `HeaderValue` remains, and nothing of the
    /// validation rules and annotations (options, which prost ignores). Top-level types are kept
    /// whole, with their nested types. The well-known types stay: nothing is generated for them
    /// (they are `pbjson-types`), but prost reads their fields.
    fn keep_what_rls_uses(mut set: FileDescriptorSet) -> FileDescriptorSet {
        let kept = reachable_types(&set);
        set.file.retain(|file| {
            file.package() == WELL_KNOWN || file.name() == RLS || declares_any(file, &kept)
        });
        for file in &mut set.file {
            if file.package() != WELL_KNOWN {
                prune(file, &kept);
            }
        }
        set
    }

    /// The fully qualified names of the top-level types that the service's methods reach.
    fn reachable_types(set: &FileDescriptorSet) -> BTreeSet<String> {
        let mut wanted: Vec<String> = set
            .file
            .iter()
            .filter(|file| file.name() == RLS)
            .flat_map(|file| &file.service)
            .flat_map(|service| &service.method)
            .flat_map(|method| [method.input_type(), method.output_type()])
            .map(str::to_owned)
            .collect();
        let mut kept = BTreeSet::new();
        while let Some(name) = wanted.pop() {
            for file in &set.file {
                for message in &file.message_type {
                    let full = qualified(file, message.name());
                    if encloses(&full, &name) && kept.insert(full) {
                        referenced_types(message, &mut wanted);
                    }
                }
                for enumeration in &file.enum_type {
                    let full = qualified(file, enumeration.name());
                    if encloses(&full, &name) {
                        kept.insert(full);
                    }
                }
            }
        }
        kept
    }

    /// Whether `file` declares one of the types in `kept`.
    fn declares_any(file: &FileDescriptorProto, kept: &BTreeSet<String>) -> bool {
        let messages = file.message_type.iter().map(|message| message.name());
        let enums = file.enum_type.iter().map(|enumeration| enumeration.name());
        messages
            .chain(enums)
            .any(|name| kept.contains(&qualified(file, name)))
    }

    /// Keeps only the types of `file` that are in `kept`, and the service if it is `rls.proto`.
    /// Comments are found by index (`source_code_info`), so those indices are renumbered.
    fn prune(file: &mut FileDescriptorProto, kept: &BTreeSet<String>) {
        let package = format!(".{}", file.package());
        let is_kept = |name: &str| kept.contains(&format!("{package}.{name}"));
        let messages = retain(&mut file.message_type, |message| is_kept(message.name()));
        let enums = retain(&mut file.enum_type, |enumeration| {
            is_kept(enumeration.name())
        });
        file.extension.clear();
        let with_service = file.name() == RLS;
        if !with_service {
            file.service.clear();
        }
        let Some(info) = &mut file.source_code_info else {
            return;
        };
        // Field numbers of `FileDescriptorProto`, the first element of a location's path.
        const MESSAGE_TYPE: i32 = 4;
        const ENUM_TYPE: i32 = 5;
        const SERVICE: i32 = 6;
        const EXTENSION: i32 = 7;
        info.location.retain_mut(|location| {
            let renumbered = match location.path.as_slice() {
                [MESSAGE_TYPE, index, ..] => messages[*index as usize],
                [ENUM_TYPE, index, ..] => enums[*index as usize],
                [SERVICE, ..] => return with_service,
                [EXTENSION, ..] => return false,
                _ => return true,
            };
            renumbered
                .inspect(|index| location.path[1] = *index)
                .is_some()
        });
    }

    /// Keeps the items that pass `keep`, and returns where each item went (`None`: dropped).
    fn retain<T>(items: &mut Vec<T>, keep: impl Fn(&T) -> bool) -> Vec<Option<i32>> {
        let mut next = 0;
        let moves = items
            .iter()
            .map(|item| {
                keep(item).then(|| {
                    next += 1;
                    next - 1
                })
            })
            .collect();
        items.retain(keep);
        moves
    }

    /// The fully qualified name of the top-level type `name` of `file`.
    fn qualified(file: &FileDescriptorProto, name: &str) -> String {
        format!(".{}.{name}", file.package())
    }

    /// Whether the type named `inner` is `outer` or nested in it (both fully qualified).
    fn encloses(outer: &str, inner: &str) -> bool {
        inner
            .strip_prefix(outer)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
    }

    /// Pushes the fully qualified names of the types that `message`'s fields, and those of the
    /// messages nested in it, refer to.
    fn referenced_types(message: &DescriptorProto, names: &mut Vec<String>) {
        names.extend(
            message
                .field
                .iter()
                .filter(|field| !field.type_name().is_empty())
                .map(|field| field.type_name().to_owned()),
        );
        for nested in &message.nested_type {
            referenced_types(nested, names);
        }
    }
}
