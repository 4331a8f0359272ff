//! The demo's operations pair (see [`crate::demo`]): metrics and deploy, which share the
//! services they talk about.

use chrono::{DateTime, Duration, Utc};
use rmcp::model::JsonObject;
use serde_json::{json, Value};

use super::{opt, stamp, text, Answer, State};

/// metrics and deploy share the services they talk about.
pub(crate) fn ops(
    s: &mut State,
    server: &str,
    tool: &str,
    args: &JsonObject,
    now: DateTime<Utc>,
) -> Answer {
    let service = |s: &State, name: &str| {
        s.services.get(name).cloned().ok_or_else(|| {
            format!(
                "no service {name:?}: the services are {:?}",
                s.services.keys().collect::<Vec<_>>()
            )
        })
    };
    match (server, tool) {
        ("metrics", "query_metrics") => {
            let q = text(args, "query")?;
            let step = args
                .get("step_seconds")
                .and_then(Value::as_i64)
                .unwrap_or(60)
                .max(1);
            let points: Vec<Value> = (0..10)
                .map(|i| {
                    let t = now.timestamp() - (9 - i) * step;
                    json!([t as f64, (120.0 + 15.0 * ((i as f64) * 0.7).sin()).round()])
                })
                .collect();
            Ok(
                json!({"series": [{"labels": {"__query__": q, "service": "api"}, "points": points}]}),
            )
        }
        ("metrics", "list_alerts") => Ok(json!({"alerts": [
            {"name": "DiskUsageHigh", "service": "db", "severity": "warning", "state": "firing", "since": stamp(now - Duration::hours(2)), "ticket": "OPS-101"},
            {"name": "LatencyP99High", "service": "api", "severity": "critical", "state": "resolved", "since": stamp(now - Duration::hours(20))}]})),
        ("metrics", "silence_alert") => Ok(
            json!({"silence_id": format!("sil-{}", s.next("silence", 10)),
            "until": stamp(now + Duration::minutes(args.get("duration_minutes").and_then(Value::as_i64).unwrap_or(60)))}),
        ),
        ("metrics", "getDashboard") => Ok(
            json!({"uid": opt(args, "uid").unwrap_or("svc-overview"), "title": opt(args, "title").unwrap_or("Service overview"),
            "panels": ["Requests/s", "Error rate", "Latency p99", "Saturation"]}),
        ),
        ("metrics", "service_slo") => {
            let name = text(args, "service")?;
            service(s, name)?;
            Ok(
                json!({"target": 0.999, "attainment": 0.9993, "error_budget_remaining": 0.3, "window": opt(args, "window").unwrap_or("30d")}),
            )
        }
        ("deploy", "list_services") => {
            let env = opt(args, "environment").unwrap_or("production");
            let list: Vec<Value> = (s.services.values()).map(|v| json!({"service": v["service"], "environment": env, "version": v[env], "replicas": v["replicas"]})).collect();
            Ok(json!({"services": list}))
        }
        ("deploy", "deploy_service" | "rollback") => {
            let name = text(args, "service")?.to_string();
            let env = text(args, "environment")?.to_string();
            let mut svc = service(s, &name)?;
            let version = match tool {
                "deploy_service" => text(args, "version")?.to_string(),
                _ => opt(args, "to_version").map_or_else(
                    || svc["previous"].as_str().unwrap_or("v1").to_string(),
                    str::to_string,
                ),
            };
            if tool == "deploy_service"
                && env == "production"
                && opt(args, "change_ticket").is_none()
            {
                return Err("a production deploy needs change_ticket: the key of an approved change, e.g. OPS-102".into());
            }
            svc["previous"] = svc[env.as_str()].clone();
            svc[env.as_str()] = json!(version);
            s.services.insert(name.clone(), svc);
            let id = format!("dep-{}", s.next("deployment", 500));
            s.deployments.insert(id.clone(), json!({"deployment_id": id, "service": name, "environment": env, "version": version,
                "status": "succeeded", "started_at": stamp(now), "finished_at": stamp(now + Duration::seconds(95))}));
            Ok(
                json!({"deployment_id": id, "status": "queued", "service": name, "environment": env, "version": version}),
            )
        }
        ("deploy", "deployment_status") => {
            let id = text(args, "deployment_id")?;
            s.deployments
                .get(id)
                .cloned()
                .ok_or_else(|| format!("no deployment {id}"))
        }
        ("deploy", "scaleService") => {
            let name = text(args, "service")?.to_string();
            let replicas = args
                .get("replicas")
                .and_then(Value::as_u64)
                .ok_or("missing argument \"replicas\" (a whole number)")?;
            let mut svc = service(s, &name)?;
            let before = svc["replicas"].clone();
            svc["replicas"] = json!(replicas);
            s.services.insert(name.clone(), svc);
            Ok(json!({"service": name, "replicas": replicas, "was": before}))
        }
        ("deploy", "get-logs") => {
            let name = text(args, "service")?;
            service(s, name)?;
            let lines: Vec<String> = (0..5)
                .map(|i| {
                    format!(
                        "{} INFO {name}: handled GET /health in {} ms",
                        stamp(now - Duration::seconds(30 * (5 - i))),
                        3 + i
                    )
                })
                .collect();
            Ok(json!({"service": name, "lines": lines}))
        }
        ("deploy", "restart_service") => {
            let name = text(args, "service")?;
            service(s, name)?;
            Ok(
                json!({"service": name, "environment": text(args, "environment")?, "restarted_at": stamp(now)}),
            )
        }
        _ => Err(format!("{server}/{tool} is not a demo tool")),
    }
}
