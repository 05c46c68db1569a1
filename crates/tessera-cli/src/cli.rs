//! Command-line arguments (clap derive).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Read, write, verify, convert and diff tensor containers.
#[derive(Debug, Parser)]
#[command(name = "tessera", version, about, long_about = None)]
pub struct Cli {
    /// Read s3:// and http(s):// inputs without the disk cache of fetched ranges
    /// (TESSERA_CACHE_DIR, else $XDG_CACHE_HOME/tessera or ~/.cache/tessera; bounded by
    /// TESSERA_CACHE_MAX_MB, 2048 by default): nothing is read from it or written to it.
    #[arg(long, global = true)]
    pub no_cache: bool,
    /// The verb.
    #[command(subcommand)]
    pub command: Command,
}

/// The verbs.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show a file's format, tensors, metadata and chunks.
    Inspect(InspectArgs),
    /// Run every integrity layer a file has and report each.
    Verify(VerifyArgs),
    /// Convert a file into another format (or rewrite it in the same one).
    Convert(Box<ConvertArgs>),
    /// Write one tensor as .npy, or one chunk as raw bytes.
    Extract(ExtractArgs),
    /// Compare two files, in any formats.
    Diff(DiffArgs),
    /// Value statistics per tensor: min, max, mean, std, NaN, Inf and zero counts.
    Stats(StatsArgs),
    /// List the formats and what each supports.
    Formats(FormatsArgs),
    /// Build a small model, write it in every format, verify, convert and diff it.
    Tour(TourArgs),
    /// Generate a signing key pair (KEY and KEY.pub): Ed25519, or ECDSA P-256 in PEM.
    Keygen(KeygenArgs),
    /// Repair a FOLD file with its Reed-Solomon parity and write the result.
    Repair(RepairArgs),
    /// WTXT tools: delta, apply, sign, encrypt, decrypt.
    Wtxt(WtxtArgs),
    /// Print the model's content identity: the same in every format it is converted to.
    Id(IdArgs),
    /// Sign the model's tensor manifest (detached; verifies after any conversion).
    Sign(SignArgs),
}

/// `tessera id`.
#[derive(Debug, Args)]
pub struct IdArgs {
    /// The file.
    pub file: PathBuf,
    /// Print JSON (with every tensor's digest).
    #[arg(long)]
    pub json: bool,
    /// Include the file metadata in the identity (it changes when a conversion changes
    /// the metadata, e.g. into a format that carries only strings).
    #[arg(long)]
    pub metadata: bool,
    /// List every tensor's digest.
    #[arg(short, long)]
    pub verbose: bool,
    /// Write a page manifest: a BLAKE3 digest per page of SIZE bytes of every tensor
    /// (a power of two from 4K to 1G; 1M when no SIZE), so that a read of a slice checks
    /// just the pages it touches. Written to -o, or to STEM.pages beside the model.
    #[arg(long, value_name = "SIZE", num_args = 0..=1, default_missing_value = "1M")]
    pub pages: Option<String>,
    /// Where --pages writes the manifest (default: STEM.pages beside the model).
    #[arg(short, long, value_name = "OUT", requires = "pages")]
    pub output: Option<PathBuf>,
    /// Reading options.
    #[command(flatten)]
    pub read: ReadArgs,
}

/// `tessera sign`.
#[derive(Debug, Args)]
pub struct SignArgs {
    /// The model file.
    pub file: PathBuf,
    /// Secret key file: `tessera keygen`'s (Ed25519 or ECDSA P-256), or a PEM ECDSA P-256
    /// key (PKCS#8 or SEC1, as OpenSSL and model-signing use).
    #[arg(long, value_name = "FILE")]
    pub key: PathBuf,
    /// Where to write the signature.
    #[arg(short, long, value_name = "OUT")]
    pub output: PathBuf,
    /// Sign the metadata too.
    #[arg(long)]
    pub metadata: bool,
    /// The signature's format: `tessera` (Tessera's signed tensor manifest) or
    /// `model-signing` (an OpenSSF model-signing bundle over the model's files, which
    /// `model_signing verify key` accepts, carrying the tensor manifest too; needs an
    /// ECDSA P-256 key).
    #[arg(long, value_name = "FORMAT", default_value = "tessera",
          value_parser = ["tessera", "model-signing"])]
    pub format: String,
    /// Put the signed manifest into the model file's metadata (key `tessera.signature`:
    /// safetensors, GGUF, zTensor, FOLD, AERO, GPTRS) instead of a detached file; OUT is
    /// then the signed model written (FILE itself to sign in place; the file is rewritten
    /// with its format's default options). `tessera verify OUT --public-key K` finds it.
    #[arg(long, conflicts_with = "format")]
    pub embed: bool,
    /// Sign a page manifest (`tessera id --pages`) with the tensors: its digest goes
    /// into the signed manifest, so the signature covers every page and a slice read
    /// checked against those pages is checked against the signer's bytes. It must list
    /// exactly the model's tensors.
    #[arg(long, value_name = "FILE")]
    pub pages: Option<String>,
    /// Reading options.
    #[command(flatten)]
    pub read: ReadArgs,
}

/// Options for reading any input file: the input options of [`AuditReadArgs`] and
/// `--no-verify`, which only verbs that hand the bytes on offer.
#[derive(Debug, Args, Clone, Default)]
pub struct ReadArgs {
    /// How the input is opened.
    #[command(flatten)]
    pub input: AuditReadArgs,
    /// Use tensor and chunk bytes without checking the digests the file stores for them
    /// (faster, and unsafe: damaged bytes pass through). The output says so.
    #[arg(long)]
    pub no_verify: bool,
}

/// Options for opening an input, what every reading verb takes; `inspect` and `verify`,
/// which audit a file rather than hand its bytes on, take only these (no `--no-verify`).
#[derive(Debug, Args, Clone, Default)]
pub struct AuditReadArgs {
    /// Recover every intact tensor of a damaged file (WTXT), saying which were lost.
    #[arg(
        long,
        help_heading = "Damaged, encrypted, authenticated or remote inputs"
    )]
    pub salvage: bool,
    /// age identity file (X25519 secret keys) to decrypt an encrypted input.
    #[arg(
        long,
        value_name = "FILE",
        help_heading = "Damaged, encrypted, authenticated or remote inputs"
    )]
    pub identity: Vec<PathBuf>,
    /// age passphrase file to decrypt an encrypted input.
    #[arg(
        long,
        value_name = "FILE",
        help_heading = "Damaged, encrypted, authenticated or remote inputs"
    )]
    pub passphrase_file: Option<PathBuf>,
    /// Open the file named as the one file it is, never the model set it belongs to: a
    /// shard of a set alone (its own tensors and metadata), a zTensor v2 root without
    /// its shard files. A directory or a set's index is then refused.
    #[arg(long)]
    pub shard_only: bool,
    /// HMAC key file to authenticate a WTXT input's arrays as they are read (an array
    /// whose HMAC fails, or that carries none, is refused).
    #[arg(
        long,
        value_name = "FILE",
        help_heading = "Damaged, encrypted, authenticated or remote inputs"
    )]
    pub input_hmac_key_file: Option<PathBuf>,
    /// S3 endpoint for s3:// locations (MinIO, R2, a local server:
    /// `http://127.0.0.1:9000`); AWS_ENDPOINT_URL when not given.
    #[arg(
        long,
        value_name = "URL",
        help_heading = "Damaged, encrypted, authenticated or remote inputs"
    )]
    pub endpoint: Option<String>,
    /// Send TESSERA_HTTP_TOKEN as the bearer token to this URL's host (without it, the
    /// token goes only to the hosts TESSERA_HTTP_TOKEN_HOSTS names; HF_TOKEN only to
    /// Hugging Face over https).
    #[arg(
        long,
        help_heading = "Damaged, encrypted, authenticated or remote inputs"
    )]
    pub token: bool,
}

impl AuditReadArgs {
    /// The same options as [`ReadArgs`] (digests checked).
    pub fn to_read(&self) -> ReadArgs {
        ReadArgs {
            input: self.clone(),
            no_verify: false,
        }
    }
}

/// The keys that decrypt an age-encrypted file (`wtxt decrypt`).
#[derive(Debug, Args, Clone, Default)]
pub struct DecryptKeyArgs {
    /// age identity file (X25519 secret keys).
    #[arg(long, value_name = "FILE")]
    pub identity: Vec<PathBuf>,
    /// age passphrase file.
    #[arg(long, value_name = "FILE")]
    pub passphrase_file: Option<PathBuf>,
}

impl DecryptKeyArgs {
    /// As [`ReadArgs`] (only the keys set).
    pub fn to_read(&self) -> ReadArgs {
        AuditReadArgs {
            identity: self.identity.clone(),
            passphrase_file: self.passphrase_file.clone(),
            ..AuditReadArgs::default()
        }
        .to_read()
    }
}

/// `tessera inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The file.
    pub file: PathBuf,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// List only the tensors whose names match this glob (`*` any run, `?` one
    /// character; `blk.*.attn_*`); the totals then count those.
    #[arg(long, value_name = "GLOB")]
    pub filter: Option<String>,
    /// Reading options.
    #[command(flatten)]
    pub read: AuditReadArgs,
}

/// `tessera verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The file.
    pub file: PathBuf,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// HMAC key file (WTXT); without it HMACs are reported "unauthenticated".
    #[arg(long, value_name = "FILE")]
    pub hmac_key_file: Option<PathBuf>,
    /// Public key file for signatures (`tessera keygen` writes KEY.pub; a PEM ECDSA
    /// P-256 key for ECDSA manifests and model-signing bundles).
    #[arg(long, value_name = "FILE")]
    pub public_key: Option<PathBuf>,
    /// A detached signature to check the model against, recognised by its content: a
    /// `tessera sign` manifest (checked tensor by tensor, whatever format they were
    /// converted to since) or an OpenSSF model-signing bundle (the model's files, and
    /// the tensors when Tessera wrote it); needs --public-key. With --tensor, only the
    /// tensors named are hashed.
    #[arg(long, value_name = "FILE", requires = "public_key")]
    pub signature: Option<PathBuf>,
    /// With a model-signing bundle Tessera wrote: check only its tensor manifest, not
    /// the signed files (for a conversion of the signed model).
    #[arg(long, requires = "signature")]
    pub tensors_only: bool,
    /// Check only the control-plane integrity (AERO IHSH).
    #[arg(long)]
    pub control: bool,
    /// Check only what reading this tensor touches (AERO PHSH pages; with --signature,
    /// only this tensor's signed digest). Repeatable.
    #[arg(long, value_name = "NAME")]
    pub tensor: Vec<String>,
    /// List every check, one line per tensor, chunk or page (the default prints one
    /// line per layer, and each failure).
    #[arg(short, long)]
    pub verbose: bool,
    /// Print only failures and repairs; the exit code says the rest.
    #[arg(short, long, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Also decode every tensor's values and fail on NaN or Inf, naming the tensors.
    #[arg(long)]
    pub values: bool,
    /// Also check every page of every tensor against a page manifest (`tessera id
    /// --pages`); FILE defaults to STEM.pages beside the model.
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "")]
    pub pages: Option<String>,
    /// Reading options.
    #[command(flatten)]
    pub read: AuditReadArgs,
}

/// `tessera convert`.
#[derive(Debug, Args)]
pub struct ConvertArgs {
    /// Input file (any supported format).
    pub input: PathBuf,
    /// Output file; its extension picks the format unless --to is given (or -o OUT).
    #[arg(value_name = "OUTPUT", required_unless_present = "output_flag")]
    pub output: Option<PathBuf>,
    /// Output file, as with extract, repair and wtxt (instead of the positional OUTPUT).
    #[arg(
        short = 'o',
        long = "output",
        value_name = "OUT",
        conflicts_with = "output"
    )]
    pub output_flag: Option<PathBuf>,
    /// With --salvage: the loss is accepted, exit 0 (without it, a conversion that lost
    /// tensors exits 6 after writing the rest).
    #[arg(
        long,
        help_heading = "Damaged, encrypted, authenticated or remote inputs"
    )]
    pub accept_loss: bool,
    /// Output format: a name or extension from `tessera formats` (ztensor, safetensors, …).
    #[arg(long, value_name = "FORMAT")]
    pub to: Option<String>,
    /// zTensor version for a zTensor output (`.zt`, --to ztensor): 1 (default) or 2.
    #[arg(long, value_name = "1|2", value_parser = clap::value_parser!(u8).range(1..=2))]
    pub zt_version: Option<u8>,
    /// A writer option of the output format, NAME=VALUE (repeatable): `-O
    /// shard_size=1G`, `-O compression=zstd:9`. `tessera formats --options` lists what
    /// each format takes; an option the output format does not take is refused. Each
    /// option is also a flag (`--shard-size 1G`), under its older names too.
    #[arg(short = 'O', long = "option", value_name = "NAME=VALUE")]
    pub option: Vec<String>,
    /// Every format's writer options as flags, derived from what the formats declare.
    #[command(flatten)]
    pub format_flags: crate::flags::FormatFlags,
    /// Cast dtypes the target cannot hold to the nearest one it can, and report it.
    #[arg(long, help_heading = "Allowing a loss (each change is printed)")]
    pub cast: bool,
    /// Store sparse tensors densely when the target has no sparse layout.
    #[arg(long, help_heading = "Allowing a loss (each change is printed)")]
    pub densify: bool,
    /// Drop metadata and opaque chunks the target cannot carry.
    #[arg(long, help_heading = "Allowing a loss (each change is printed)")]
    pub drop_metadata: bool,
    /// GGUF source: decode quantized tensors (q4_0 … q6_k, tq*, mxfp4, iq4_*) to f32, f16
    /// or bf16, as gguf-py's dequantize does; any source: an MXFP4 pair `X_blocks` +
    /// `X_scales` (gpt-oss) becomes one tensor `X`.
    #[arg(long, value_name = "DTYPE", value_parser = ["f32", "f16", "bf16"], help_heading = "Allowing a loss (each change is printed)")]
    pub dequantize: Option<String>,
    /// GGUF target: quantize float tensors to q8_0, q4_0, q4_1, q5_0 or q5_1, as gguf-py's
    /// quantize does; 1-D tensors and rows that are not whole blocks stay float.
    #[arg(long, value_name = "TYPE", value_parser = ["q8_0", "q4_0", "q4_1", "q5_0", "q5_1"], help_heading = "Allowing a loss (each change is printed)")]
    pub quantize: Option<String>,
    /// Write a model set (safetensors: Hugging Face shards + index; GGUF: llama.cpp
    /// splits; zTensor v2: a shard table; AERO: one file of several WTSH shards; any
    /// other format: shards + a Tessera index `<stem>.tessera-set.json`) of shards
    /// holding at most this many tensor bytes; the output names the set
    /// (`dir/model.safetensors`). Sizes: `2G`, `2.5M`; K, M, G, T and KiB … TiB are
    /// powers of 1024 (`5G` = `5GiB` = 5·2^30), KB, MB, GB, TB powers of 1000 as in
    /// huggingface_hub (`5GB` = 5·10^9).
    #[arg(
        long,
        value_name = "BYTES",
        conflicts_with = "shards",
        help_heading = "Sharded output"
    )]
    pub max_shard_size: Option<String>,
    /// Write a model set of this many shards (at least 1) of about equal size (see
    /// --max-shard-size); with --to dcp, a checkpoint as N ranks write it (every tensor
    /// cut by rows across them).
    #[arg(long, value_name = "N", help_heading = "Sharded output")]
    pub shards: Option<u32>,
    /// Do not fsync the output: still written to a temporary file and renamed into
    /// place (never a half file under the name), but not flushed to disk, so a power
    /// loss or OS crash soon after may lose it. For frequent checkpoints.
    #[arg(long)]
    pub no_fsync: bool,
    /// Reading options for the input.
    #[command(flatten)]
    pub read: ReadArgs,
}

impl ConvertArgs {
    /// The output path, positional or `-o`.
    pub fn output_path(&self) -> &std::path::Path {
        match (&self.output, &self.output_flag) {
            (Some(p), _) | (None, Some(p)) => p,
            // clap requires one of them.
            (None, None) => std::path::Path::new(""),
        }
    }
}

/// `tessera extract`.
#[derive(Debug, Args)]
pub struct ExtractArgs {
    /// The file.
    pub file: PathBuf,
    /// Tensor or chunk name.
    pub name: String,
    /// Output path: a tensor is written in the format its extension names (`.npy`, or
    /// no extension, for NumPy; `.safetensors`, `.zt`, …), a chunk as its raw bytes;
    /// `-` writes to standard output (never to a terminal).
    #[arg(short, long, value_name = "OUT")]
    pub output: PathBuf,
    /// Decode GGUF's quantized tensors (q4_0 … q6_k, tq*, mxfp4, iq*) to f32, f16 or
    /// bf16, as gguf-py's dequantize does (without it a quantized tensor is written as
    /// stored, to a format that holds it: .gguf); NAME `X` of an MXFP4 pair `X_blocks` +
    /// `X_scales` (gpt-oss) is the pair decoded.
    #[arg(long, value_name = "DTYPE", value_parser = ["f32", "f16", "bf16"])]
    pub dequantize: Option<String>,
    /// Cast a tensor whose dtype the output format cannot store to the nearest one it
    /// can (f4_e2m1 to .npy as f16), as `convert --cast` does.
    #[arg(long)]
    pub cast: bool,
    /// Only part of the tensor, in numpy's slicing syntax, dimensions separated by
    /// commas: `0:1024,:`, `::2,-1`, `...,3:5`, `::-1` (positions from 0, negative ones
    /// from the end; a bound outside its dimension is refused, not clamped). Where the
    /// format stores the tensor raw only the bytes of those elements are read.
    #[arg(long, value_name = "SLICE", allow_hyphen_values = true)]
    pub slice: Option<String>,
    /// Reading options.
    #[command(flatten)]
    pub read: ReadArgs,
}

/// `tessera diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// First file.
    pub a: PathBuf,
    /// Second file.
    pub b: PathBuf,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Absolute tolerance: elements a, b are equal when |a - b| <= atol + rtol * |b|
    /// (numpy's isclose; NaN equals NaN). Default 0: exact.
    #[arg(long, value_name = "X", default_value_t = 0.0)]
    pub atol: f64,
    /// Relative tolerance (see --atol). Default 0: exact.
    #[arg(long, value_name = "X", default_value_t = 0.0)]
    pub rtol: f64,
    /// Decode GGUF's quantized tensors (q4_0 … q6_k, tq*, mxfp4, iq*) to f32, f16 or
    /// bf16, as gguf-py's dequantize does before comparing (a quantized model against
    /// its float original: the values compared with --atol/--rtol; without it, the type
    /// change is reported).
    #[arg(long, value_name = "DTYPE", value_parser = ["f32", "f16", "bf16"])]
    pub dequantize: Option<String>,
    /// Reading options.
    #[command(flatten)]
    pub read: ReadArgs,
}

/// `tessera stats`.
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// The file, or a model set (index, any shard, or its directory).
    pub file: PathBuf,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Only the tensors whose names match this glob (`*` any run, `?` one character).
    #[arg(long, value_name = "GLOB")]
    pub filter: Option<String>,
    /// Also draw each tensor's histogram (40 bins over its finite range) into this SVG
    /// file; with --json each tensor gets a "histogram" {"edges", "counts"}.
    #[arg(long, value_name = "OUT.svg")]
    pub plot: Option<PathBuf>,
    /// Decode GGUF's quantized tensors (q4_0 … q6_k, tq*, mxfp4, iq*) to f32, f16 or
    /// bf16, as gguf-py's dequantize does (without it their statistics are not computed).
    #[arg(long, value_name = "DTYPE", value_parser = ["f32", "f16", "bf16"])]
    pub dequantize: Option<String>,
    /// Reading options.
    #[command(flatten)]
    pub read: ReadArgs,
}

/// `tessera formats`.
#[derive(Debug, Args)]
pub struct FormatsArgs {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Print the Markdown table the README carries.
    #[arg(long)]
    pub markdown: bool,
    /// List the writer options each format takes (`convert -O NAME=VALUE`, Python
    /// keyword arguments).
    #[arg(long)]
    pub options: bool,
}

/// `tessera tour`.
#[derive(Debug, Args)]
pub struct TourArgs {
    /// Keep the files in this directory (default: a temporary one, removed at the end).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// `tessera keygen`.
#[derive(Debug, Args)]
pub struct KeygenArgs {
    /// Secret key path; the public key goes to PATH.pub.
    #[arg(short, long, value_name = "PATH")]
    pub output: PathBuf,
    /// Replace an existing key pair at PATH (without it, an existing key is never
    /// overwritten).
    #[arg(long)]
    pub force: bool,
    /// `ed25519` (hex key files) or `ecdsa-p256` (PEM: PKCS#8 secret key, SPKI public
    /// key, as OpenSSL and OpenSSF model-signing use).
    #[arg(long, value_name = "ALG", default_value = "ed25519",
          value_parser = ["ed25519", "ecdsa-p256"])]
    pub algorithm: String,
}

/// `tessera repair`.
#[derive(Debug, Args)]
pub struct RepairArgs {
    /// The damaged file.
    pub input: PathBuf,
    /// Where to write the repaired file.
    #[arg(short, long, value_name = "OUT")]
    pub output: PathBuf,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `tessera wtxt …`.
#[derive(Debug, Args)]
pub struct WtxtArgs {
    /// The WTXT verb.
    #[command(subcommand)]
    pub command: WtxtCommand,
}

/// WTXT verbs.
#[derive(Debug, Subcommand)]
pub enum WtxtCommand {
    /// Write the chunks that changed from BASE to TARGET as a DELTA v2 file.
    Delta {
        /// The base snapshot.
        base: PathBuf,
        /// The target snapshot.
        target: PathBuf,
        /// Output delta file.
        #[arg(short, long, value_name = "OUT")]
        output: PathBuf,
        /// Tessera's extension: carry the target's `cap` and `root` lines and arrays'
        /// HMACs, so any target is rebuilt byte for byte and checked against its root.
        /// Conforming DELTA v2 readers reject such a delta.
        #[arg(long)]
        with_target_root: bool,
    },
    /// Apply a delta to its base, giving the target snapshot (unsigned).
    Apply {
        /// The base snapshot.
        base: PathBuf,
        /// The delta.
        delta: PathBuf,
        /// Output snapshot.
        #[arg(short, long, value_name = "OUT")]
        output: PathBuf,
        /// Re-sign the result with this secret key.
        #[arg(long, value_name = "FILE")]
        sign_key: Option<PathBuf>,
    },
    /// Sign a snapshot in place (or to -o) with an Ed25519 key.
    Sign {
        /// The snapshot.
        file: PathBuf,
        /// Secret key file.
        #[arg(long, value_name = "FILE")]
        key: PathBuf,
        /// Output (default: replace FILE).
        #[arg(short, long, value_name = "OUT")]
        output: Option<PathBuf>,
    },
    /// Write the WSUM of a streamed snapshot (WTXT-S, `root_pending`) written without
    /// one: every array is checked first, and a damaged one refuses it.
    Finalize {
        /// The WTXT-S.
        file: PathBuf,
        /// Output WSUM (default: FILE.wsum, which must not exist yet).
        #[arg(short, long, value_name = "OUT")]
        output: Option<PathBuf>,
        /// The previous snapshot, to chain the merkle from (default: no previous).
        #[arg(long, value_name = "FILE")]
        prev: Option<PathBuf>,
        /// Sign the WSUM with this Ed25519 secret key.
        #[arg(long, value_name = "FILE")]
        sign_key: Option<PathBuf>,
        /// HMAC key file: check the arrays' HMACs too before finalizing.
        #[arg(long, value_name = "FILE")]
        hmac_key_file: Option<PathBuf>,
    },
    /// Encrypt a file with age (ASCII armor) for recipients or a passphrase.
    Encrypt {
        /// The plain file.
        file: PathBuf,
        /// Output.
        #[arg(short, long, value_name = "OUT")]
        output: PathBuf,
        /// X25519 recipient (`age1…`). Repeatable.
        #[arg(short, long, value_name = "RECIPIENT")]
        recipient: Vec<String>,
        /// Passphrase file.
        #[arg(long, value_name = "FILE")]
        passphrase_file: Option<PathBuf>,
    },
    /// Decrypt an age-armored file.
    Decrypt {
        /// The encrypted file.
        file: PathBuf,
        /// Output.
        #[arg(short, long, value_name = "OUT")]
        output: PathBuf,
        /// Reading options (identity or passphrase).
        #[command(flatten)]
        read: DecryptKeyArgs,
    },
}
