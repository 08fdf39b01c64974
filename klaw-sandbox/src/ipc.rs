//! The messages between the engine, the sandbox server and its helpers: sequenced
//! packets on a pair of Unix sockets, each with the descriptors it carries
//! (`SCM_RIGHTS`). The server (`crate::server`) and the kept sandbox (`crate::kept`)
//! both speak it.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{BorrowedFd, OwnedFd};

use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketFlags, SocketType,
};

/// The largest request (the command's JSON) the server takes; a longer command runs
/// through the one-shot helper instead (`Server::fits`).
pub(crate) const MAX_REQUEST: usize = 96 * 1024;

/// An anonymous pair of connected sequenced-packet sockets (close-on-exec): messages
/// arrive whole, with their descriptors.
pub(crate) fn socket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    Ok(rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )?)
}

/// Sends one message with `fds` attached.
pub(crate) fn send(socket: &OwnedFd, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(4))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(io::Error::other("too many descriptors for one message"));
    }
    let sent = rustix::net::sendmsg(
        socket,
        &[io::IoSlice::new(bytes)],
        &mut control,
        SendFlags::NOSIGNAL,
    )?;
    if sent == bytes.len() {
        Ok(())
    } else {
        Err(io::Error::other("the message was cut"))
    }
}

/// One message and the descriptors that came with it (close-on-exec); `None` at end
/// of file.
pub(crate) fn receive(socket: BorrowedFd<'_>) -> io::Result<Option<(Vec<u8>, Vec<OwnedFd>)>> {
    // One buffer for the process's life: a new one per message would be zeroed, page by
    // page, each time (and copied again in every supervisor forked after).
    thread_local! {
        static BUF: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0_u8; MAX_REQUEST + 1]);
    }
    BUF.with_borrow_mut(|buf| receive_into(socket, buf))
}

/// [`receive`] into `buf`.
fn receive_into(
    socket: BorrowedFd<'_>,
    buf: &mut [u8],
) -> io::Result<Option<(Vec<u8>, Vec<OwnedFd>)>> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(4))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let got = loop {
        match rustix::net::recvmsg(
            socket,
            &mut [io::IoSliceMut::new(buf)],
            &mut control,
            RecvFlags::CMSG_CLOEXEC,
        ) {
            Err(rustix::io::Errno::INTR) => {}
            other => break other?,
        }
    };
    let mut fds = Vec::new();
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(received) = message {
            fds.extend(received);
        }
    }
    if got.bytes == 0 && fds.is_empty() {
        return Ok(None);
    }
    if got.bytes > MAX_REQUEST
        || got
            .flags
            .intersects(rustix::net::ReturnFlags::TRUNC | rustix::net::ReturnFlags::CTRUNC)
    {
        return Err(io::Error::other("the message was cut"));
    }
    Ok(Some((buf[..got.bytes].to_vec(), fds)))
}
