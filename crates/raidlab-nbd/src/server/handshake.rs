//! The fixed newstyle handshake of one connection: options (export names,
//! INFO/GO with block sizes, LIST, structured replies, STARTTLS) up to the
//! start of transmission. It decides what a client may negotiate and answers
//! every refusal with an option error; it must never read a request of the
//! transmission phase or touch an export's volume.

use super::*;

impl Server {
    pub(super) fn find(&self, name: &str) -> Option<usize> {
        // The empty name means the default export: the first one.
        if name.is_empty() && !self.exports.is_empty() {
            return Some(0);
        }
        self.exports.iter().position(|e| e.name == name)
    }

    pub(super) fn block_sizes(&self, e: &Export) -> (u32, u32, u32) {
        let max = self.limits.max_payload;
        // The protocol wants a power of two. A full stripe that is not one (three
        // data disks) is hinted as its largest power-of-two divisor (the chunk),
        // so requests of that size still never straddle a stripe unaligned.
        let p = e.preferred_block.max(1);
        let preferred = (p & p.wrapping_neg()).clamp(512, max);
        // Every volume takes any byte offset and length (arrays and files do
        // read-modify-write internally), so the minimum is 1.
        (1, preferred, max)
    }

    /// The fixed newstyle handshake, up to the start of transmission or up to a
    /// STARTTLS the caller must answer with a TLS handshake on the socket and
    /// [`Server::resume_handshake`].
    pub fn handshake<R: Read, W: Write>(&self, r: &mut R, w: &mut W) -> Result<Handshake, Outcome> {
        send(w, &encode_greeting(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES))?;
        let mut cf = [0u8; 4];
        recv(r, &mut cf)?;
        let client_flags = u32::from_be_bytes(cf);
        if client_flags & !(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES) != 0 {
            return Err(Outcome::Violation(format!(
                "client flags {client_flags:#x} include ones this server does not know"
            )));
        }
        let no_zeroes = client_flags & FLAG_C_NO_ZEROES != 0;
        self.options(r, w, no_zeroes, false)
    }

    /// Continue the handshake over TLS after STARTTLS. What was negotiated
    /// before (structured replies) is forgotten, as the protocol says.
    pub fn resume_handshake<R: Read, W: Write>(
        &self,
        r: &mut R,
        w: &mut W,
        resume: Resume,
    ) -> Result<Negotiated, Outcome> {
        match self.options(r, w, resume.no_zeroes, true)? {
            Handshake::Done(n) => Ok(n),
            // options() refuses a second STARTTLS; never reached.
            Handshake::StartTls(_) => Err(Outcome::Violation("STARTTLS twice".into())),
        }
    }

    fn options<R: Read, W: Write>(
        &self,
        r: &mut R,
        w: &mut W,
        no_zeroes: bool,
        tls_active: bool,
    ) -> Result<Handshake, Outcome> {
        let forced = self.tls.as_ref().is_some_and(|t| t.require) && !tls_active;
        let mut structured = false;
        loop {
            let mut hb = [0u8; OPTION_HEADER_LEN];
            recv(r, &mut hb)?;
            let h = parse_option_header(&hb);
            if h.magic != OPTS_MAGIC {
                return Err(Outcome::Violation(format!(
                    "option magic {:#x} is not IHAVEOPT",
                    h.magic
                )));
            }
            if h.length > self.limits.max_option_len {
                skip(r, h.length as u64)?;
                if h.option == OPT_EXPORT_NAME {
                    // No error reply exists for EXPORT_NAME: hang up.
                    return Err(Outcome::Violation("export name too long".into()));
                }
                reply_err(w, h.option, REP_ERR_TOO_BIG, "option data too long")?;
                continue;
            }
            let mut data = vec![0u8; h.length as usize];
            recv(r, &mut data)?;
            if forced && !matches!(h.option, OPT_STARTTLS | OPT_ABORT) {
                if h.option == OPT_EXPORT_NAME {
                    return Err(Outcome::Violation(
                        "TLS is required but the client asked for an export without STARTTLS"
                            .into(),
                    ));
                }
                reply_err(
                    w,
                    h.option,
                    REP_ERR_TLS_REQD,
                    "this server requires TLS: use STARTTLS",
                )?;
                continue;
            }
            match h.option {
                OPT_EXPORT_NAME => {
                    let name = String::from_utf8_lossy(&data);
                    let Some(i) = self.find(&name) else {
                        return Err(Outcome::Violation(format!("no export named {name:?}")));
                    };
                    let e = &self.exports[i];
                    let mut b = e.volume.size().to_be_bytes().to_vec();
                    b.extend_from_slice(&e.transmission_flags().to_be_bytes());
                    if !no_zeroes {
                        b.extend_from_slice(&[0u8; 124]);
                    }
                    send(w, &b)?;
                    return Ok(Handshake::Done(Negotiated {
                        export: i,
                        structured,
                    }));
                }
                OPT_ABORT => {
                    // The client may already have gone; a failed ACK changes nothing.
                    let _ = send(w, &encode_option_reply(h.option, REP_ACK, &[]));
                    return Err(Outcome::Closed);
                }
                OPT_LIST => {
                    if !data.is_empty() {
                        reply_err(w, h.option, REP_ERR_INVALID, "LIST takes no data")?;
                        continue;
                    }
                    for e in &self.exports {
                        send(
                            w,
                            &encode_option_reply(h.option, REP_SERVER, &list_entry(&e.name)),
                        )?;
                    }
                    send(w, &encode_option_reply(h.option, REP_ACK, &[]))?;
                }
                OPT_STRUCTURED_REPLY => {
                    if !data.is_empty() {
                        reply_err(
                            w,
                            h.option,
                            REP_ERR_INVALID,
                            "STRUCTURED_REPLY takes no data",
                        )?;
                        continue;
                    }
                    structured = true;
                    send(w, &encode_option_reply(h.option, REP_ACK, &[]))?;
                }
                OPT_INFO | OPT_GO => {
                    let Some(req) = parse_info_request(&data) else {
                        reply_err(w, h.option, REP_ERR_INVALID, "malformed INFO/GO request")?;
                        continue;
                    };
                    let Some(i) = self.find(&req.name) else {
                        let msg = format!("no export named {:?}", req.name);
                        reply_err(w, h.option, REP_ERR_UNKNOWN, &msg)?;
                        continue;
                    };
                    let e = &self.exports[i];
                    let mut out = encode_option_reply(
                        h.option,
                        REP_INFO,
                        &info_export(e.volume.size(), e.transmission_flags()),
                    );
                    // Block sizes are sent even unasked: the minimum of 1 binds
                    // clients to nothing, the rest are hints.
                    let (min, pref, max) = self.block_sizes(e);
                    out.extend(encode_option_reply(
                        h.option,
                        REP_INFO,
                        &info_block_size(min, pref, max),
                    ));
                    if req.requests.contains(&INFO_NAME) {
                        out.extend(encode_option_reply(
                            h.option,
                            REP_INFO,
                            &info_string(INFO_NAME, &e.name),
                        ));
                    }
                    if req.requests.contains(&INFO_DESCRIPTION) && !e.description.is_empty() {
                        out.extend(encode_option_reply(
                            h.option,
                            REP_INFO,
                            &info_string(INFO_DESCRIPTION, &e.description),
                        ));
                    }
                    out.extend(encode_option_reply(h.option, REP_ACK, &[]));
                    send(w, &out)?;
                    if h.option == OPT_GO {
                        return Ok(Handshake::Done(Negotiated {
                            export: i,
                            structured,
                        }));
                    }
                }
                OPT_STARTTLS => {
                    if self.tls.is_none() {
                        reply_err(
                            w,
                            h.option,
                            REP_ERR_UNSUP,
                            "this server was started without TLS",
                        )?;
                    } else if tls_active {
                        reply_err(w, h.option, REP_ERR_INVALID, "TLS is already on")?;
                    } else if !data.is_empty() {
                        reply_err(w, h.option, REP_ERR_INVALID, "STARTTLS takes no data")?;
                    } else {
                        send(w, &encode_option_reply(h.option, REP_ACK, &[]))?;
                        return Ok(Handshake::StartTls(Resume { no_zeroes }));
                    }
                }
                other => {
                    let msg = format!("option {other} is not supported");
                    reply_err(w, other, REP_ERR_UNSUP, &msg)?;
                }
            }
        }
    }
}

fn reply_err<W: Write>(w: &mut W, option: u32, kind: u32, msg: &str) -> Result<(), Outcome> {
    send(
        w,
        &encode_option_reply(option, kind, truncate(msg).as_bytes()),
    )
}
