//! Distils static token vectors from a sentence-transformers BERT folder
//! (all-MiniLM-L6-v2): every vocabulary token through the model alone, PCA, a weight per
//! token by its rank, 8-bit rows. The output is what `route` reads as static vectors
//! (the `static_vectors` module of toolgate-route).
//!
//! ```text
//! cargo run --release -p toolgate --features embed --example distill_vectors -- \
//!     MODEL_DIR OUT [--dim 256] [--weight sif|zipf|none]
//! ```

use std::io::Write;
use std::path::PathBuf;
use toolgate_route::Embedder;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: distill_vectors MODEL_DIR OUT [--dim N] [--weight sif|zipf|none]";
    let model_dir = PathBuf::from(args.next().ok_or(usage)?);
    let out = PathBuf::from(args.next().ok_or(usage)?);
    let (mut dim, mut weighting) = (256usize, "sif".to_string());
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(usage)?;
        match flag.as_str() {
            "--dim" => dim = value.parse()?,
            "--weight" => weighting = value,
            _ => return Err(usage.into()),
        }
    }
    let embedder = Embedder::load(&model_dir)?;
    let vocab_text = std::fs::read_to_string(model_dir.join("vocab.txt"))?;
    let vocab: Vec<&str> = vocab_text.lines().collect();
    let id = |t: &str| vocab.iter().position(|v| *v == t).map(|i| i as u32);
    let (cls, sep) = (
        id("[CLS]").ok_or("no [CLS]")?,
        id("[SEP]").ok_or("no [SEP]")?,
    );
    let n = vocab.len();
    let skip = |t: &str| t == "[PAD]" || t.starts_with("[unused");

    // Every token alone through the model.
    let full = embedder.dim();
    let mut raw = vec![0f64; n * full];
    let seqs: Vec<[u32; 3]> = (0..n as u32).map(|i| [cls, i, sep]).collect();
    let todo: Vec<usize> = (0..n).filter(|&i| !skip(vocab[i])).collect();
    for (done, chunk) in todo.chunks(512).enumerate() {
        let batch: Vec<&[u32]> = chunk.iter().map(|&i| seqs[i].as_slice()).collect();
        for (&i, v) in chunk.iter().zip(embedder.pooled(&batch)?) {
            for (r, x) in raw[i * full..(i + 1) * full].iter_mut().zip(v) {
                *r = f64::from(x);
            }
        }
        eprint!("\r{} / {}", (done + 1) * 512, todo.len());
    }
    eprintln!();

    // PCA over the tokens that occur.
    let mut mean = vec![0f64; full];
    for &i in &todo {
        for (m, x) in mean.iter_mut().zip(&raw[i * full..(i + 1) * full]) {
            *m += x / todo.len() as f64;
        }
    }
    let mut cov = vec![0f64; full * full];
    for &i in &todo {
        let row: Vec<f64> = raw[i * full..(i + 1) * full]
            .iter()
            .zip(&mean)
            .map(|(x, m)| x - m)
            .collect();
        for a in 0..full {
            let ra = row[a];
            for b in a..full {
                cov[a * full + b] += ra * row[b];
            }
        }
    }
    for a in 0..full {
        for b in 0..a {
            cov[a * full + b] = cov[b * full + a];
        }
    }
    let (values, vectors) = jacobi(cov, full);
    let mut order: Vec<usize> = (0..full).collect();
    order.sort_by(|&a, &b| values[b].total_cmp(&values[a]));
    let dim = dim.min(full);
    let kept: f64 =
        order[..dim].iter().map(|&k| values[k]).sum::<f64>() / values.iter().sum::<f64>();
    eprintln!("PCA {full} -> {dim}: {:.1}% of the variance", kept * 100.0);

    // Project, weight by rank, quantise.
    let sif = 1e-4;
    let inv_sum: f64 = (0..n).map(|r| 1.0 / (r as f64 + 2.0)).sum();
    let mut scales = Vec::with_capacity(n);
    let mut values_i8 = Vec::with_capacity(n * dim);
    for i in 0..n {
        let mut row = vec![0f64; dim];
        if !skip(vocab[i]) {
            let x: Vec<f64> = raw[i * full..(i + 1) * full]
                .iter()
                .zip(&mean)
                .map(|(x, m)| x - m)
                .collect();
            for (slot, &k) in row.iter_mut().zip(&order[..dim]) {
                *slot = (0..full).map(|a| x[a] * vectors[a * full + k]).sum();
            }
            let w = match weighting.as_str() {
                "sif" => {
                    let p = (1.0 / (i as f64 + 2.0)) / inv_sum;
                    sif / (sif + p)
                }
                "zipf" => (1.0 + i as f64).ln(),
                _ => 1.0,
            };
            row.iter_mut().for_each(|v| *v *= w);
        }
        let max = row.iter().fold(0f64, |m, v| m.max(v.abs()));
        let scale = if max > 0.0 { max / 127.0 } else { 1.0 };
        scales.push(scale as f32);
        values_i8.extend(
            row.iter()
                .map(|v| (v / scale).round().clamp(-127.0, 127.0) as i8),
        );
    }
    let mut f = std::io::BufWriter::new(std::fs::File::create(&out)?);
    f.write_all(b"TGSV1\0")?;
    f.write_all(&(dim as u32).to_le_bytes())?;
    f.write_all(&(n as u32).to_le_bytes())?;
    for s in &scales {
        f.write_all(&s.to_le_bytes())?;
    }
    f.write_all(&values_i8.iter().map(|&v| v as u8).collect::<Vec<u8>>())?;
    for t in &vocab {
        f.write_all(t.as_bytes())?;
        f.write_all(b"\n")?;
    }
    f.flush()?;
    eprintln!("wrote {} ({n} tokens, {dim} dimensions)", out.display());
    Ok(())
}

/// Eigenvalues and eigenvectors (columns of the `n * n` result) of a symmetric matrix, by
/// cyclic Jacobi rotations.
fn jacobi(mut a: Vec<f64>, n: usize) -> (Vec<f64>, Vec<f64>) {
    let mut v = vec![0f64; n * n];
    for i in 0..n {
        v[i * n + i] = 1.0;
    }
    for _sweep in 0..30 {
        let off: f64 = (0..n)
            .flat_map(|p| (p + 1..n).map(move |q| (p, q)))
            .map(|(p, q)| a[p * n + q] * a[p * n + q])
            .sum();
        if off < 1e-18 {
            break;
        }
        for p in 0..n {
            for q in p + 1..n {
                let apq = a[p * n + q];
                if apq.abs() < 1e-300 {
                    continue;
                }
                let theta = (a[q * n + q] - a[p * n + p]) / (2.0 * apq);
                let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
                let t = if theta == 0.0 { 1.0 } else { t };
                let c = 1.0 / (t * t + 1.0).sqrt();
                let s = t * c;
                for k in 0..n {
                    let (akp, akq) = (a[k * n + p], a[k * n + q]);
                    a[k * n + p] = c * akp - s * akq;
                    a[k * n + q] = s * akp + c * akq;
                }
                for k in 0..n {
                    let (apk, aqk) = (a[p * n + k], a[q * n + k]);
                    a[p * n + k] = c * apk - s * aqk;
                    a[q * n + k] = s * apk + c * aqk;
                }
                for k in 0..n {
                    let (vkp, vkq) = (v[k * n + p], v[k * n + q]);
                    v[k * n + p] = c * vkp - s * vkq;
                    v[k * n + q] = s * vkp + c * vkq;
                }
            }
        }
    }
    ((0..n).map(|i| a[i * n + i]).collect(), v)
}
